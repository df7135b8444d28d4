/*
 * nlm/nsm.c - the gateway's status monitor (NSM v1, XNFS chapter 11).
 *
 * State number: kept in STATE/nsm/state, raised at every start to the
 * next odd number (odd means "up", as statd counts) before any lock is
 * granted, so a client can tell this run from the last.
 *
 * Clients: the first lock or share of a host in a run writes
 * STATE/nsm/clients/<hex of its name>-<hex of its address> holding the
 * address it called from as text (records of older versions are named by
 * the name alone).  At the next start every recorded host is sent
 * SM_NOTIFY (its statd then has its lockd reclaim during the grace
 * period) and its record goes once the notify got through and the host
 * has not locked again meanwhile.  A host that says FREE_ALL, or whose
 * own statd tells us it restarted (SM_NOTIFY to us), loses its locks and
 * its record: what that name holds from that address only, so nobody
 * releases another host's locks by sending its name.  One address has
 * at most NSM_NAMES_PER_HOST names recorded.
 *
 * In a cluster each record is also a note of this node in the database
 * ("nsm": "ADDRESS<tab>NAME"); when a gateway dies, the first survivor
 * to see it takes its notes and sends each host SM_NOTIFY naming the
 * service (--nlm-name, the floating address clients mount), so their
 * lockds reclaim through whichever gateway holds that address now.  The
 * locks themselves are in the database and were never lost: a reclaim
 * finds its own lock and is granted.
 *
 * SM_MON registrations (someone asks to hear when a host restarts) are
 * kept in memory; when that host's SM_NOTIFY arrives, each registrant is
 * called back with its my_id procedure, as statd does for its lockd.
 * SM_MON, UNMON and UNMON_ALL are the local host's (a lockd asks its own
 * statd): from anywhere else they fail.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "db/db.h"
#include "nlm_int.h"

#define NSM_NOTIFY_TRIES 5
#define NSM_MON_MAX 1024      /* registrations kept: callers choose the names */
#define NSM_NAMES_PER_HOST 16 /* client names one address may record */
#define NSM_CLIENTS_MAX 65536 /* records over all hosts */

struct nlm_client {
	struct nlm_client *next;
	struct nlm_host host;
	char *name;
};

static bool host_eq(const struct nlm_host *a, const struct nlm_host *b)
{
	return !memcmp(a->addr, b->addr, sizeof(a->addr));
}

bool nsm_peer_local(const struct sockaddr_storage *peer)
{
	struct nlm_host h, lo6 = { .addr = { [15] = 1 } };

	nlm_host_of(peer, &h);
	/* ::1, and 127.0.0.1 as IPv4-mapped: the local statd's and lockd's
	 * address (other loopback addresses may stand for other hosts). */
	struct nlm_host lo4 = {
		.addr = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 }
	};

	return host_eq(&h, &lo6) || host_eq(&h, &lo4);
}

/* host's address as text (IPv4-mapped ones as IPv4). */
static void host_text(const struct nlm_host *h, char *buf, size_t cap)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(h->addr, v4, sizeof(v4)))
		inet_ntop(AF_INET, h->addr + 12, buf, (socklen_t)cap);
	else
		inet_ntop(AF_INET6, h->addr, buf, (socklen_t)cap);
}

/* A cluster's note of (name, host): "ADDRESS<tab>NAME". */
static void note_of(const char *name, const struct nlm_host *h, char *buf,
		    size_t cap)
{
	char a[INET6_ADDRSTRLEN];

	host_text(h, a, sizeof(a));
	snprintf(buf, cap, "%s\t%s", a, name);
}

/* Add or remove the cluster's note of (name, host); alone, nothing. */
static void note_set(struct nlm *n, const char *name, const struct nlm_host *h,
		     bool add)
{
	char note[INET6_ADDRSTRLEN + 300];
	int rc;

	if (!n->opts.db)
		return;
	note_of(name, h, note, sizeof(note));
	rc = add ? db_note_add(n->opts.db, "nsm", note)
		 : db_note_del(n->opts.db, "nsm", note);
	if (rc)
		log_warn("nsm: %s the cluster's record of client %s: %s",
			 add ? "adding" : "removing", name, strerror(-rc));
}

/* A client record being notified: removed once the notify got through. */
struct nsm_notify_ctx {
	struct nlm *n;
	struct nlm_host host;
	char *name;
	char path[];
};

static int write_file(const char *path, const char *data)
{
	char tmp[4200];
	size_t len = strlen(data);
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, data, len) != (ssize_t)len || fsync(fd))
		rc = errno ? -errno : -EIO;
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int nsm_state_bump(struct nlm *n)
{
	char path[4200], buf[32] = "";
	long old = 0;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/state", n->state_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t r = read(fd, buf, sizeof(buf) - 1);

		close(fd);
		if (r > 0) {
			buf[r] = 0;
			old = strtol(buf, NULL, 10);
		}
	} else if (errno != ENOENT) {
		return -errno;
	}
	/* Next odd number; wrap before int32 overflows, skipping 0. */
	n->state = (int32_t)((old < 0 || old >= 0x7ffffffd)
				     ? 1
				     : (old | 1) + (old & 1 ? 2 : 0));
	snprintf(buf, sizeof(buf), "%d\n", n->state);
	rc = write_file(path, buf);
	return rc;
}

/* "STATE/nsm/clients/<hex of name>-<hex of host>" into buf. */
static int client_path(const struct nlm *n, const char *name,
		       const struct nlm_host *host, char *buf, size_t cap)
{
	size_t len = strlen(name), off;
	int k = snprintf(buf, cap, "%s/clients/", n->state_dir);

	if (k < 0 || (size_t)k + 2 * len + 1 + 32 + 1 > cap)
		return -ENAMETOOLONG;
	off = (size_t)k;
	for (size_t i = 0; i < len; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%02x",
					(unsigned char)name[i]);
	buf[off++] = '-';
	for (size_t i = 0; i < sizeof(host->addr); i++)
		off += (size_t)snprintf(buf + off, cap - off, "%02x",
					host->addr[i]);
	return 0;
}

int nsm_client_note(struct nlm *n, const char *caller,
		    const struct sockaddr_storage *peer)
{
	char path[4200], host[INET6_ADDRSTRLEN + 2] = "";
	size_t same_host = 0, all = 0;
	struct nlm_client *c;
	struct nlm_host h;
	const void *a;
	int rc = 0;

	nlm_host_of(peer, &h);
	pthread_mutex_lock(&n->clients_lock);
	for (c = n->clients; c; c = c->next, all++) {
		if (!host_eq(&c->host, &h))
			continue;
		if (!strcmp(c->name, caller))
			goto out_unlock;
		same_host++;
	}
	/* Host names are at most 255 bytes; longer ones are not recorded. */
	if (strlen(caller) > 255 ||
	    client_path(n, caller, &h, path, sizeof(path)))
		goto out_unlock;
	if (same_host >= NSM_NAMES_PER_HOST || all >= NSM_CLIENTS_MAX) {
		rc = -ENOLCK;
		goto out_unlock;
	}
	c = malloc(sizeof(*c));
	if (!c || !(c->name = strdup(caller))) {
		free(c);
		rc = -ENOMEM;
		goto out_unlock;
	}
	c->host = h;
	c->next = n->clients;
	n->clients = c;
	a = peer->ss_family == AF_INET6
		    ? (const void *)&((const struct sockaddr_in6 *)peer)
			      ->sin6_addr
		    : (const void *)&((const struct sockaddr_in *)peer)
			      ->sin_addr;
	inet_ntop(peer->ss_family, a, host, INET6_ADDRSTRLEN);
	strcat(host, "\n");
	/*
	 * Written before the lock is granted, on purpose: a crash right
	 * after must still find this host to notify.  Once per host a run.
	 */
	rc = write_file(path, host);
	if (rc) {
		log_warn("nsm: cannot record client %s: %s", caller,
			 strerror(-rc));
		rc = 0; /* the lock is still good for this run */
	}
	pthread_mutex_unlock(&n->clients_lock);
	/* For the survivors, should this gateway die (a round trip, once
	 * per host a run). */
	note_set(n, caller, &h, true);
	return 0;
out_unlock:
	pthread_mutex_unlock(&n->clients_lock);
	return rc;
}

/* Remove the record file of (caller, host), in either naming. */
static void client_unlink(struct nlm *n, const char *caller,
			  const struct nlm_host *host)
{
	char path[4200];

	if (!client_path(n, caller, host, path, sizeof(path)))
		unlink(path);
	/* An older version's record: the name alone. */
	if (!client_path(n, caller, host, path, sizeof(path))) {
		*strrchr(path, '-') = '\0';
		unlink(path);
	}
}

size_t nsm_client_forget(struct nlm *n, const char *caller,
			 const struct nlm_host *host)
{
	struct nlm_client **pp, *c, *gone = NULL;
	size_t k = 0;

	pthread_mutex_lock(&n->clients_lock);
	for (pp = &n->clients; (c = *pp);) {
		if (strcmp(c->name, caller) ||
		    (host && !host_eq(&c->host, host))) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		client_unlink(n, c->name, &c->host);
		c->next = gone;
		gone = c;
		k++;
	}
	if (host)
		client_unlink(n, caller, host);
	pthread_mutex_unlock(&n->clients_lock);
	while ((c = gone)) {
		gone = c->next;
		note_set(n, c->name, &c->host, false);
		free(c->name);
		free(c);
	}
	return k;
}

static void notify_done(void *arg, int err, void *res)
{
	struct nsm_notify_ctx *x = arg;
	struct nlm_client *c;

	(void)res;
	if (!err) {
		char path[4200];

		pthread_mutex_lock(&x->n->clients_lock);
		for (c = x->n->clients; c; c = c->next)
			if (!strcmp(c->name, x->name) &&
			    host_eq(&c->host, &x->host))
				break;
		/* A host that locked again in this run keeps its record (an
		 * older version's record was replaced by one in the new
		 * naming then). */
		bool again = c &&
			     !client_path(x->n, c->name, &c->host, path,
					  sizeof(path)) &&
			     !strcmp(path, x->path);

		if (!again && x->path[0])
			unlink(x->path);
		pthread_mutex_unlock(&x->n->clients_lock);
		if (!again && x->path[0])
			note_set(x->n, x->name, &x->host, false);
		log_info("nsm: notified %s of state %d", x->name, x->n->state);
	}
	free(x->name);
	free(x);
}

/* SM_NOTIFY (name, ss) of this run's state; x's path says what to
 * remove once it got through ("": nothing).  x is the queue's then. */
static void notify_queue(struct nlm *n, struct nsm_notify_ctx *x,
			 const struct sockaddr_storage *ss)
{
	sm_stat_chge args = { .mon_name = n->hostname, .state = n->state };

	x->n = n;
	nlm_host_of(ss, &x->host);
	if (nlm_cb_queue(n->cb, &(struct nlm_cb_call){
					.addr = *ss,
					.prog = NSM_PROG,
					.vers = NSM_VERS1,
					.proc = SM_NOTIFY,
					.encode = (xdrproc_t)xdr_sm_stat_chge,
					.args = &args,
					.tries = NSM_NOTIFY_TRIES,
					.done = notify_done,
					.arg = x })) {
		free(x->name);
		free(x);
	}
}

/* An address in text into ss (port 0).  0, or -EINVAL. */
static int addr_parse(const char *text, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, text, &((struct sockaddr_in *)ss)->sin_addr) ==
	    1)
		ss->ss_family = AF_INET;
	else if (inet_pton(AF_INET6, text,
			   &((struct sockaddr_in6 *)ss)->sin6_addr) == 1)
		ss->ss_family = AF_INET6;
	return ss->ss_family ? 0 : -EINVAL;
}

struct takeover {
	struct nlm *n;
	uint32_t node;
};

/* One note of a dead gateway: tell that host to reclaim (here). */
static void takeover_one(void *arg, const char *note)
{
	struct takeover *t = arg;
	const char *tab = strchr(note, '\t');
	char addr[INET6_ADDRSTRLEN] = "";
	struct sockaddr_storage ss;
	struct nsm_notify_ctx *x;

	if (tab && (size_t)(tab - note) < sizeof(addr) && tab[1]) {
		memcpy(addr, note, (size_t)(tab - note));
		addr[tab - note] = '\0';
	}
	if (!addr[0] || addr_parse(addr, &ss)) {
		log_warn("nsm: bad note of node %u: %s", t->node, note);
		return;
	}
	x = calloc(1, sizeof(*x) + 1); /* path "": no record file */
	if (!x || !(x->name = strdup(tab + 1))) {
		free(x);
		return;
	}
	log_info("nsm: node %u is down: asking client %s (%s) to reclaim "
		 "its locks",
		 t->node, x->name, addr);
	notify_queue(t->n, x, &ss);
}

/* db_node_fn: the clients of a gateway that died reclaim through us. */
static void nsm_node_down(void *ctx, uint32_t node)
{
	struct takeover t = { .n = ctx, .node = node };
	int rc = db_notes_take(t.n->opts.db, node, "nsm", takeover_one, &t);

	if (rc)
		log_warn("nsm: the clients of node %u (down): %s", node,
			 strerror(-rc));
}

void nsm_cluster_start(struct nlm *n)
{
	if (n->opts.db)
		db_on_node_down(n->opts.db, nsm_node_down, n);
}

void nsm_cluster_stop(struct nlm *n)
{
	if (n->opts.db)
		db_on_node_down(n->opts.db, NULL, n);
}

/* Queue SM_NOTIFY to the host recorded in file leaf of clients/. */
static void notify_one(struct nlm *n, const char *dir, const char *leaf)
{
	char name[256], buf[INET6_ADDRSTRLEN + 2] = "";
	const char *dash = strchr(leaf, '-');
	size_t len = dash ? (size_t)(dash - leaf) : strlen(leaf), plen;
	struct sockaddr_storage ss = { 0 };
	struct nsm_notify_ctx *x;
	ssize_t r;
	int fd;

	/* "NAME" (older versions) or "NAME-HOST", both in hex. */
	if (len % 2 || len / 2 >= sizeof(name) || strchr(leaf, '.'))
		return;
	for (size_t i = 0; i < len / 2; i++) {
		unsigned v;

		if (sscanf(leaf + 2 * i, "%2x", &v) != 1 || !v)
			return;
		name[i] = (char)v;
	}
	name[len / 2] = 0;
	plen = strlen(dir) + 1 + strlen(leaf) + 1;
	x = malloc(sizeof(*x) + plen);
	if (!x)
		return;
	snprintf(x->path, plen, "%s/%s", dir, leaf);
	fd = open(x->path, O_RDONLY | O_CLOEXEC);
	r = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	buf[r > 0 ? r : 0] = 0;
	buf[strcspn(buf, "\n")] = 0;
	if (addr_parse(buf, &ss) || !(x->name = strdup(name))) {
		log_warn("nsm: bad client record %s", x->path);
		free(x);
		return;
	}
	notify_queue(n, x, &ss);
}

void nsm_notify_clients(struct nlm *n)
{
	char dir[4200];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/clients", n->state_dir);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			notify_one(n, dir, e->d_name);
	closedir(d);
}

static void mon_free(struct nsm_mon *m)
{
	free(m->mon_name);
	free(m->my_name);
	free(m);
}

void nsm_free(struct nlm *n)
{
	struct nlm_client *c, *cn;
	struct nsm_mon *m, *mn;

	for (c = n->clients; c; c = cn) {
		cn = c->next;
		free(c->name);
		free(c);
	}
	for (m = n->mons; m; m = mn) {
		mn = m->next;
		mon_free(m);
	}
	n->clients = NULL;
	n->mons = NULL;
}

static bool my_id_eq(const struct nsm_mon *m, const sm_my_id *id)
{
	return id->my_name && !strcmp(m->my_name, id->my_name) &&
	       m->my_prog == id->my_prog && m->my_vers == id->my_vers &&
	       m->my_proc == id->my_proc;
}

static void proc_null(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	(void)res;
	rpc_call_done(call);
}

/*
 * The client check of NSM: calls from this host, or (local_only false)
 * from a host some export admits.  Refusals are logged per host.
 */
static bool nsm_caller_ok(struct rpc_call *call, const char *proc,
			  bool local_only)
{
	struct nlm *n = rpc_call_ctx(call);
	const struct sockaddr_storage *peer = rpc_call_peer(call);
	char a[LOG_ADDR_MAX];

	if (nsm_peer_local(peer) ||
	    (!local_only &&
	     nfsd_client_admitted(n->opts.nfsd, peer, rpc_call_loop(call))))
		return true;
	log_host(LOG_LVL_WARN, peer, "nsm: %s from %s refused: %s", proc,
		 log_addr(peer, a),
		 local_only ? "only this host may ask"
			    : "no export rule admits it");
	return false;
}

static void proc_stat(struct rpc_call *call, void *args, void *res)
{
	struct nlm *n = rpc_call_ctx(call);
	sm_stat_res *r = res;

	(void)args;
	r->res_stat =
		nsm_caller_ok(call, "STAT", false) ? stat_succ : stat_fail;
	r->state = n->state;
	rpc_call_done(call);
}

static void proc_mon(struct rpc_call *call, void *args, void *res)
{
	struct nlm *n = rpc_call_ctx(call);
	sm_mon *a = args;
	sm_stat_res *r = res;
	struct nsm_mon *m, **pp;
	size_t count = 0;

	r->state = n->state;
	r->res_stat = stat_fail;
	if (!a->mon_id.mon_name || !a->mon_id.my_id.my_name ||
	    !nsm_caller_ok(call, "MON", true))
		goto out;
	pthread_mutex_lock(&n->clients_lock);
	for (pp = &n->mons; (m = *pp); pp = &m->next, count++)
		if (!strcmp(m->mon_name, a->mon_id.mon_name) &&
		    my_id_eq(m, &a->mon_id.my_id))
			break;
	if (!m && count < NSM_MON_MAX && (m = calloc(1, sizeof(*m)))) {
		m->mon_name = strdup(a->mon_id.mon_name);
		m->my_name = strdup(a->mon_id.my_id.my_name);
		if (m->mon_name && m->my_name) {
			*pp = m;
		} else {
			mon_free(m);
			m = NULL;
		}
	}
	if (m) {
		/* A repeated SM_MON refreshes the private data and address. */
		m->my_prog = a->mon_id.my_id.my_prog;
		m->my_vers = a->mon_id.my_id.my_vers;
		m->my_proc = a->mon_id.my_id.my_proc;
		memcpy(m->priv, a->priv, sizeof(m->priv));
		m->peer = *rpc_call_peer(call);
		r->res_stat = stat_succ;
	}
	pthread_mutex_unlock(&n->clients_lock);
out:
	rpc_call_done(call);
}

/* Remove registrations matching id and (when not NULL) mon_name. */
static void mon_remove(struct nlm *n, const char *mon_name, const sm_my_id *id)
{
	struct nsm_mon **pp, *m;

	pthread_mutex_lock(&n->clients_lock);
	for (pp = &n->mons; (m = *pp);) {
		if (my_id_eq(m, id) &&
		    (!mon_name || !strcmp(m->mon_name, mon_name))) {
			*pp = m->next;
			mon_free(m);
		} else {
			pp = &m->next;
		}
	}
	pthread_mutex_unlock(&n->clients_lock);
}

static void proc_unmon(struct rpc_call *call, void *args, void *res)
{
	struct nlm *n = rpc_call_ctx(call);
	sm_mon_id *a = args;
	sm_stat *r = res;

	if (a->mon_name && nsm_caller_ok(call, "UNMON", true))
		mon_remove(n, a->mon_name, &a->my_id);
	r->state = n->state;
	rpc_call_done(call);
}

static void proc_unmon_all(struct rpc_call *call, void *args, void *res)
{
	struct nlm *n = rpc_call_ctx(call);
	sm_stat *r = res;

	if (nsm_caller_ok(call, "UNMON_ALL", true))
		mon_remove(n, NULL, args);
	r->state = n->state;
	rpc_call_done(call);
}

/*
 * A host tells us it restarted: its locks are void; tell registrants.
 * Honoured from this host (every lock of the name) or from an address
 * the name holds locks or a record from (what that address holds): a
 * notify from anywhere else releases nothing of another host's.
 */
static void proc_notify(struct rpc_call *call, void *args, void *res)
{
	struct nlm *n = rpc_call_ctx(call);
	const struct sockaddr_storage *peer = rpc_call_peer(call);
	sm_stat_chge *a = args;
	bool local = nsm_peer_local(peer);
	char addr[LOG_ADDR_MAX];
	struct nsm_mon *m;
	struct nlm_host h;
	size_t k, recs;

	(void)res;
	if (!a->mon_name)
		goto out;
	nlm_host_of(peer, &h);
	k = nlm_tab_free_all(n, a->mon_name, local ? NULL : &h);
	recs = nsm_client_forget(n, a->mon_name, local ? NULL : &h);
	if (!local && !k && !recs) {
		log_host(LOG_LVL_WARN, peer,
			 "nsm: SM_NOTIFY for %s from %s ignored: that host "
			 "holds nothing from this address",
			 a->mon_name, log_addr(peer, addr));
		goto out;
	}
	log_host(LOG_LVL_INFO, peer,
		 "nsm: %s restarted (state %d, from %s): released %zu locks",
		 a->mon_name, a->state, log_addr(peer, addr), k);
	pthread_mutex_lock(&n->clients_lock);
	for (m = n->mons; m; m = m->next) {
		nlm4_sm_status st = { .mon_name = a->mon_name,
				      .state = a->state };

		if (strcmp(m->mon_name, a->mon_name))
			continue;
		memcpy(st.priv, m->priv, sizeof(st.priv));
		if (nlm_cb_queue(
			    n->cb,
			    &(struct nlm_cb_call){
				    .addr = m->peer,
				    .prog = (uint32_t)m->my_prog,
				    .vers = (uint32_t)m->my_vers,
				    .proc = (uint32_t)m->my_proc,
				    .encode = (xdrproc_t)xdr_nlm4_sm_status,
				    .args = &st,
				    .tries = 3 }))
			log_warn("nsm: cannot queue the callback for %s",
				 m->my_name);
	}
	pthread_mutex_unlock(&n->clients_lock);
out:
	rpc_call_done(call);
}

#define SM_PROC(nm, fn, at, rt, fl)                                     \
	{                                                               \
		.name = nm, .decode = (xdrproc_t)xdr_##at,              \
		.args_size = sizeof(at), .encode = (xdrproc_t)xdr_##rt, \
		.res_size = sizeof(rt), .handler = fn, .flags = fl      \
	}

/* SIMU_CRASH (5) is for a host's own daemons; it is not offered. */
static const struct rpc_proc sm_procs[] = {
	[SM_NULL] = { .name = "NULL",
		      .handler = proc_null,
		      .flags = RPC_PROC_IDEMPOTENT | RPC_PROC_AUTH_NONE_OK },
	[SM_STAT] = SM_PROC("STAT", proc_stat, sm_name, sm_stat_res,
			    RPC_PROC_IDEMPOTENT),
	[SM_MON] = SM_PROC("MON", proc_mon, sm_mon, sm_stat_res,
			   RPC_PROC_IDEMPOTENT | RPC_PROC_MAKES_WRITE),
	[SM_UNMON] = SM_PROC("UNMON", proc_unmon, sm_mon_id, sm_stat,
			     RPC_PROC_IDEMPOTENT | RPC_PROC_MAKES_WRITE),
	[SM_UNMON_ALL] = SM_PROC("UNMON_ALL", proc_unmon_all, sm_my_id, sm_stat,
				 RPC_PROC_IDEMPOTENT | RPC_PROC_MAKES_WRITE),
	[SM_SIMU_CRASH] = { .name = "SIMU_CRASH" },
	[SM_NOTIFY] = { .name = "NOTIFY",
			.decode = (xdrproc_t)xdr_sm_stat_chge,
			.args_size = sizeof(sm_stat_chge),
			.handler = proc_notify,
			.flags = RPC_PROC_MAKES_WRITE },
};

/* In a cluster SM_NOTIFY frees locks in the database: off the loops. */
#define SM_NPROCS (sizeof(sm_procs) / sizeof(sm_procs[0]))

static void notify_deferred(struct rpc_call *call, void *args, void *res)
{
	nlm_defer(rpc_call_ctx(call), proc_notify, call, args, res);
}

static struct rpc_proc sm_procs_cluster[SM_NPROCS];

struct rpc_program nsm_program(struct nlm *n)
{
	const struct rpc_proc *procs = sm_procs;

	if (n->opts.db) {
		memcpy(sm_procs_cluster, sm_procs, sizeof(sm_procs));
		sm_procs_cluster[SM_NOTIFY].handler = notify_deferred;
		procs = sm_procs_cluster;
	}
	return (struct rpc_program){ .name = "nsm",
				     .prog = NSM_PROG,
				     .vers = NSM_VERS1,
				     .procs = procs,
				     .nprocs = SM_NPROCS,
				     .ctx = n };
}
