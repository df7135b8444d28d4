/*
 * Unit tests for s3/sign.c: AWS's published SigV4 test suite
 * (aws-sig-v4-test-suite: AKIDEXAMPLE, 20150830T123600Z, us-east-1,
 * service "service") and the S3 examples of the AWS S3 SigV4 docs
 * (examplebucket, AKIAIOSFODNN7EXAMPLE, 20130524T000000Z).  Each case
 * checks the canonical request and the Authorization header separately,
 * so a failure says which step is wrong.  The suite's path-normalisation
 * cases are left out on purpose: S3 signs the path as sent.
 *
 * Also the inputs of signing: s3/creds.c's chain (environment, shared
 * files, and EC2 instance metadata served by a fake IMDSv2 on loopback).
 */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "s3/buf.h"
#include "s3/creds.h"
#include "s3/sign.h"

#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SUITE_DATE "20150830T123600Z"
#define SUITE_AUTHZ                                                           \
	"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/" \
	"aws4_request, "
#define HOST                                    \
	{                                       \
		"Host", "example.amazonaws.com" \
	}
#define XDATE                            \
	{                                \
		"X-Amz-Date", SUITE_DATE \
	}
#define STS_TOKEN                                                              \
	"AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWL" \
	"WsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGd"   \
	"QrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU"  \
	"9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBA"   \
	"z+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxB"   \
	"A=="

struct vec {
	const char *name, *method, *uri;
	struct s3_kv query[4];
	struct s3_kv headers[6];
	const char *payload; /* body, hashed by the test; NULL = empty */
	const char *creq, *authz;
	const char *sts_hash; /* last line of the string to sign, if known */
};

static const struct vec suite[] = {
	{ "get-vanilla",
	  "GET",
	  "/",
	  { { 0 } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
	  "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63" },
	{ "get-vanilla-empty-query-key",
	  "GET",
	  "/",
	  { { "Param1", "value1" } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/"
	  "\nParam1=value1\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb",
	  NULL },
	{ "get-vanilla-query-order-key-case",
	  "GET",
	  "/",
	  { { "Param2", "value2" }, { "Param1", "value1" } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\n"
	  "x-amz-date:" SUITE_DATE "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
	  "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0" },
	{ "get-vanilla-query-order-key",
	  "GET",
	  "/",
	  { { "Param1", "value2" }, { "Param1", "Value1" } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/\nParam1=Value1&Param1=value2\nhost:example.amazonaws.com\n"
	  "x-amz-date:" SUITE_DATE "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1",
	  NULL },
	{ "get-vanilla-query-order-value",
	  "GET",
	  "/",
	  { { "Param1", "value2" }, { "Param1", "value1" } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/\nParam1=value1&Param1=value2\nhost:example.amazonaws.com\n"
	  "x-amz-date:" SUITE_DATE "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694",
	  NULL },
	{ "get-vanilla-query-order-encoded",
	  "GET",
	  "/",
	  { { "Param-3", "Value3" },
	    { "Param", "Value2" },
	    { "\xe1\x88\xb4", "Value1" } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/\n%E1%88%B4=Value1&Param=Value2&Param-3=Value3\n"
	  "host:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac",
	  NULL },
	{ "get-vanilla-query-unreserved",
	  "GET",
	  "/",
	  { { "-._~"
	      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
	      "-._~"
	      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy"
	      "z" } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/"
	  "\n-._~"
	  "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
	  "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\n"
	  "host:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197",
	  NULL },
	{ "get-vanilla-utf8-query",
	  "GET",
	  "/",
	  { { "\xe1\x88\xb4", "bar" } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/"
	  "\n%E1%88%B4=bar\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
	  NULL },
	{ "get-vanilla-with-session-token",
	  "GET",
	  "/",
	  { { 0 } },
	  { HOST,
	    XDATE,
	    { "X-Amz-Security-Token", "6e86291e8372ff2a2260956d9b8aae1d763fbf31"
				      "5fa00fa31553b73ebf194267" } },
	  NULL,
	  "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\nx-amz-security-token:"
	  "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267\n"
	  "\nhost;x-amz-date;x-amz-security-token\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date;x-amz-security-token, "
	  "Signature="
	  "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8",
	  NULL },
	{ "get-unreserved",
	  "GET",
	  "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
	  { { 0 } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/"
	  "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	  "\n\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
	  NULL },
	{ "get-utf8",
	  "GET",
	  "/%E1%88%B4",
	  { { 0 } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/"
	  "%E1%88%B4\n\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85",
	  NULL },
	{ "get-space",
	  "GET",
	  "/example%20space/",
	  { { 0 } },
	  { HOST, XDATE },
	  NULL,
	  "GET\n/example%20space/"
	  "\n\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741",
	  NULL },
	{ "get-header-key-duplicate",
	  "GET",
	  "/",
	  { { 0 } },
	  { HOST,
	    { "My-Header1", "value2" },
	    { "My-Header1", "value2" },
	    { "My-Header1", "value1" },
	    XDATE },
	  NULL,
	  "GET\n/"
	  "\n\nhost:example.amazonaws.com\nmy-header1:value2,value2,value1\n"
	  "x-amz-date:" SUITE_DATE "\n\nhost;my-header1;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;my-header1;x-amz-date, Signature="
	  "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
	  NULL },
	{ "get-header-value-multiline",
	  "GET",
	  "/",
	  { { 0 } },
	  { HOST, { "My-Header1", "value1\n  value2\n     value3" }, XDATE },
	  NULL,
	  "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1 value2 "
	  "value3\n"
	  "x-amz-date:" SUITE_DATE "\n\nhost;my-header1;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;my-header1;x-amz-date, Signature="
	  "cfd34249e4b1c8d6b91ef74165d41a32e5fab3306300901bb65a51a73575eefd",
	  NULL },
	{ "get-header-value-order",
	  "GET",
	  "/",
	  { { 0 } },
	  { HOST,
	    { "My-Header1", "value4" },
	    { "My-Header1", "value1" },
	    { "My-Header1", "value3" },
	    { "My-Header1", "value2" },
	    XDATE },
	  NULL,
	  "GET\n/\n\nhost:example.amazonaws.com\n"
	  "my-header1:value4,value1,value3,value2\nx-amz-date:" SUITE_DATE
	  "\n\nhost;my-header1;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;my-header1;x-amz-date, Signature="
	  "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01",
	  NULL },
	{ "get-header-value-trim",
	  "GET",
	  "/",
	  { { 0 } },
	  { HOST,
	    { "My-Header1", " value1" },
	    { "My-Header2", " \"a   b   c\"" },
	    XDATE },
	  NULL,
	  "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\n"
	  "my-header2:\"a b c\"\nx-amz-date:" SUITE_DATE
	  "\n\nhost;my-header1;my-header2;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;my-header1;my-header2;x-amz-date, "
	  "Signature="
	  "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
	  "a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7" },
	{ "post-vanilla",
	  "POST",
	  "/",
	  { { 0 } },
	  { HOST, XDATE },
	  NULL,
	  "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
	  NULL },
	{ "post-vanilla-query",
	  "POST",
	  "/",
	  { { "Param1", "value1" } },
	  { HOST, XDATE },
	  NULL,
	  "POST\n/"
	  "\nParam1=value1\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\nhost;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date, Signature="
	  "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11",
	  NULL },
	{ "post-header-key-sort",
	  "POST",
	  "/",
	  { { 0 } },
	  { HOST, { "My-Header1", "value1" }, XDATE },
	  NULL,
	  "POST\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\n"
	  "x-amz-date:" SUITE_DATE "\n\nhost;my-header1;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;my-header1;x-amz-date, Signature="
	  "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c",
	  NULL },
	{ "post-header-value-case",
	  "POST",
	  "/",
	  { { 0 } },
	  { HOST, { "My-Header1", "VALUE1" }, XDATE },
	  NULL,
	  "POST\n/\n\nhost:example.amazonaws.com\nmy-header1:VALUE1\n"
	  "x-amz-date:" SUITE_DATE "\n\nhost;my-header1;x-amz-date\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;my-header1;x-amz-date, Signature="
	  "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d",
	  NULL },
	{ "post-x-www-form-urlencoded",
	  "POST",
	  "/",
	  { { 0 } },
	  { { "Content-Type", "application/x-www-form-urlencoded" },
	    HOST,
	    XDATE },
	  "Param1=value1",
	  "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\n"
	  "host:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\ncontent-type;host;x-amz-date\n"
	  "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
	  SUITE_AUTHZ
	  "SignedHeaders=content-type;host;x-amz-date, Signature="
	  "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
	  "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281" },
	{ "post-x-www-form-urlencoded-parameters",
	  "POST",
	  "/",
	  { { 0 } },
	  { { "Content-Type",
	      "application/x-www-form-urlencoded; charset=utf8" },
	    HOST,
	    XDATE },
	  "Param1=value1",
	  "POST\n/\n\ncontent-type:application/x-www-form-urlencoded; "
	  "charset=utf8\n"
	  "host:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\n\ncontent-type;host;x-amz-date\n"
	  "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
	  SUITE_AUTHZ
	  "SignedHeaders=content-type;host;x-amz-date, Signature="
	  "1a72ec8f64bd914b0e42e42607c7fbce7fb2c7465f63e3092b3b0d39fa77a6fe",
	  NULL },
	{ "post-sts-header-before",
	  "POST",
	  "/",
	  { { 0 } },
	  { HOST, XDATE, { "X-Amz-Security-Token", STS_TOKEN } },
	  NULL,
	  "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:" SUITE_DATE
	  "\nx-amz-security-token:" STS_TOKEN
	  "\n\nhost;x-amz-date;x-amz-security-token\n" EMPTY,
	  SUITE_AUTHZ
	  "SignedHeaders=host;x-amz-date;x-amz-security-token, "
	  "Signature="
	  "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
	  NULL },
};

#define S3_DATE "20130524T000000Z"
#define S3_HOST                                          \
	{                                                \
		"Host", "examplebucket.s3.amazonaws.com" \
	}
#define S3_AUTHZ                                                 \
	"AWS4-HMAC-SHA256 "                                      \
	"Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/" \
	"aws4_request, "

/* The S3 docs' examples ("Signature calculations for the Authorization
 * header: transferring payload in a single chunk"). */
static const struct vec s3_docs[] = {
	{ "GET object with range",
	  "GET",
	  "/test.txt",
	  { { 0 } },
	  { S3_HOST,
	    { "Range", "bytes=0-9" },
	    { "x-amz-content-sha256", EMPTY },
	    { "x-amz-date", S3_DATE } },
	  NULL,
	  "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\n"
	  "range:bytes=0-9\nx-amz-content-sha256:" EMPTY "\nx-amz-date:" S3_DATE
	  "\n\nhost;range;x-amz-content-sha256;x-amz-date\n" EMPTY,
	  S3_AUTHZ
	  "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
	  "Signature="
	  "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
	  "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972" },
	{ "PUT object",
	  "PUT",
	  "/test%24file.text",
	  { { 0 } },
	  { S3_HOST,
	    { "Date", "Fri, 24 May 2013 00:00:00 GMT" },
	    { "x-amz-content-sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b"
				      "4b4e99e42034a8b803f8b072" },
	    { "x-amz-date", S3_DATE },
	    { "x-amz-storage-class", "REDUCED_REDUNDANCY" } },
	  "Welcome to Amazon S3.",
	  "PUT\n/test%24file.text\n\ndate:Fri, 24 May 2013 00:00:00 GMT\n"
	  "host:examplebucket.s3.amazonaws.com\nx-amz-content-sha256:"
	  "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n"
	  "x-amz-date:" S3_DATE "\nx-amz-storage-class:REDUCED_REDUNDANCY\n\n"
	  "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"
	  "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
	  S3_AUTHZ
	  "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;"
	  "x-amz-storage-class, Signature="
	  "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
	  "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d" },
	{ "GET bucket lifecycle",
	  "GET",
	  "/",
	  { { "lifecycle", "" } },
	  { S3_HOST,
	    { "x-amz-content-sha256", EMPTY },
	    { "x-amz-date", S3_DATE } },
	  NULL,
	  "GET\n/\nlifecycle=\nhost:examplebucket.s3.amazonaws.com\n"
	  "x-amz-content-sha256:" EMPTY "\nx-amz-date:" S3_DATE
	  "\n\nhost;x-amz-content-sha256;x-amz-date\n" EMPTY,
	  S3_AUTHZ
	  "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
	  "Signature="
	  "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
	  "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca" },
	{ "GET bucket list objects",
	  "GET",
	  "/",
	  { { "max-keys", "2" }, { "prefix", "J" } },
	  { S3_HOST,
	    { "x-amz-content-sha256", EMPTY },
	    { "x-amz-date", S3_DATE } },
	  NULL,
	  "GET\n/\nmax-keys=2&prefix=J\nhost:examplebucket.s3.amazonaws.com\n"
	  "x-amz-content-sha256:" EMPTY "\nx-amz-date:" S3_DATE
	  "\n\nhost;x-amz-content-sha256;x-amz-date\n" EMPTY,
	  S3_AUTHZ
	  "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
	  "Signature="
	  "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
	  "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7" },
};

static size_t count_kv(const struct s3_kv *kv, size_t max)
{
	size_t n = 0;

	while (n < max && kv[n].name)
		n++;
	return n;
}

static void run_vec(const struct vec *v, const char *date, const char *ak,
		    const char *sk, const char *service)
{
	char hash[S3_SHA256_HEX];
	const char *body = v->payload ? v->payload : "";
	struct s3_sign_in in = {
		.method = v->method,
		.uri = v->uri,
		.query = v->query,
		.nquery = count_kv(v->query, 4),
		.headers = v->headers,
		.nheaders = count_kv(v->headers, 6),
		.payload_hash = hash,
		.amz_date = date,
		.region = "us-east-1",
		.service = service,
		.access_key = ak,
		.secret_key = sk,
	};
	struct s3_sign_out out;
	int rc;

	CU_ASSERT_FATAL(s3_sha256_hex(body, strlen(body), hash) == 0);
	rc = s3_sign(&in, &out);
	CU_ASSERT(rc == 0);
	if (rc == 0) {
		CU_ASSERT_STRING_EQUAL(out.creq.p, v->creq);
		CU_ASSERT_STRING_EQUAL(out.authz.p, v->authz);
		if (v->sts_hash) {
			const char *nl = strrchr(out.sts.p, '\n');

			CU_ASSERT(nl && strcmp(nl + 1, v->sts_hash) == 0);
			CU_ASSERT(strncmp(out.sts.p, "AWS4-HMAC-SHA256\n",
					  17) == 0);
		}
		if (strcmp(out.creq.p, v->creq) ||
		    strcmp(out.authz.p, v->authz))
			fprintf(stderr,
				"\n%s:\n--- got creq:\n%s\n--- authz:\n%s\n",
				v->name, out.creq.p, out.authz.p);
	}
	s3_sign_out_free(&out);
}

static void test_suite_vectors(void)
{
	for (size_t i = 0; i < sizeof(suite) / sizeof(suite[0]); i++)
		run_vec(&suite[i], SUITE_DATE, "AKIDEXAMPLE",
			"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "service");
}

static void test_s3_doc_examples(void)
{
	for (size_t i = 0; i < sizeof(s3_docs) / sizeof(s3_docs[0]); i++)
		run_vec(&s3_docs[i], S3_DATE, "AKIAIOSFODNN7EXAMPLE",
			"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "s3");
}

/* Query values S3 sees: '/' encoded, "bare" flags as "name=", and the
 * canonical query returned is sorted (what goes in the URL). */
static void test_query_canonical(void)
{
	const struct s3_kv q[] = {
		{ "uploads", NULL },
		{ "prefix", "a b/c+d" },
		{ "delimiter", "/" },
		{ "continuation-token",
		  "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=" },
	};
	const struct s3_kv h[] = { { "host", "h" }, { "x-amz-date", S3_DATE } };
	struct s3_sign_in in = {
		.method = "GET",
		.uri = "/b",
		.query = q,
		.nquery = 4,
		.headers = h,
		.nheaders = 2,
		.payload_hash = S3_UNSIGNED_PAYLOAD,
		.amz_date = S3_DATE,
		.region = "r",
		.service = "s3",
		.access_key = "a",
		.secret_key = "s",
	};
	struct s3_sign_out out;

	CU_ASSERT_FATAL(s3_sign(&in, &out) == 0);
	CU_ASSERT_STRING_EQUAL(
		out.query.p,
		"continuation-token=1ueGcxLPRx1Tr%2FXYExHnhbYLgveDs2J"
		"%2Fwm36Hy4vbOwM%3D&delimiter=%2F&prefix=a%20b%2Fc%2Bd"
		"&uploads=");
	CU_ASSERT(strstr(out.creq.p, "\nUNSIGNED-PAYLOAD") != NULL);
	s3_sign_out_free(&out);
}

/* x-amz-copy-source sorts before x-amz-copy-source-range (libcurl 7.88
 * gets this wrong), whatever order they are given in. */
static void test_copy_source_range_order(void)
{
	const struct s3_kv h[] = {
		{ "x-amz-copy-source-range", "bytes=0-9" },
		{ "X-Amz-Copy-Source", "/b/k" },
		{ "host", "h" },
		{ "x-amz-date", S3_DATE },
	};
	struct s3_sign_in in = {
		.method = "PUT",
		.uri = "/b/k2",
		.headers = h,
		.nheaders = 4,
		.payload_hash = EMPTY,
		.amz_date = S3_DATE,
		.region = "r",
		.service = "s3",
		.access_key = "a",
		.secret_key = "s",
	};
	struct s3_sign_out out;

	CU_ASSERT_FATAL(s3_sign(&in, &out) == 0);
	CU_ASSERT(strstr(out.creq.p, "x-amz-copy-source:/b/"
				     "k\nx-amz-copy-source-range:bytes=0-9\n"
				     "x-amz-date:" S3_DATE "\n\n"
				     "host;x-amz-copy-source;x-amz-copy-source-"
				     "range;x-amz-date\n") != NULL);
	s3_sign_out_free(&out);
}

static void test_bad_input(void)
{
	const struct s3_kv h[] = { { "bad name", "v" } };
	struct s3_sign_in in = {
		.method = "GET",
		.uri = "/",
		.headers = h,
		.nheaders = 1,
		.payload_hash = EMPTY,
		.amz_date = S3_DATE,
		.region = "r",
		.service = "s3",
		.access_key = "a",
		.secret_key = "s",
	};
	struct s3_sign_out out;

	CU_ASSERT(s3_sign(&in, &out) == -EINVAL);
	s3_sign_out_free(&out);
	in.headers = NULL;
	in.nheaders = 0;
	CU_ASSERT(s3_sign(&in, &out) == -EINVAL);
	s3_sign_out_free(&out);
	in.amz_date = "2013";
	CU_ASSERT(s3_sign(&in, &out) == -EINVAL);
	s3_sign_out_free(&out);
}

static void test_encoding_and_digests(void)
{
	struct s3_buf b = { 0 };
	char md5[32], date[S3_AMZ_DATE_LEN];

	s3_buf_uri(&b, "a b/\xe1\x88\xb4~*", true);
	CU_ASSERT_STRING_EQUAL(b.p, "a%20b/%E1%88%B4~%2A");
	s3_buf_reset(&b);
	s3_buf_uri(&b, "a/b", false);
	CU_ASSERT_STRING_EQUAL(b.p, "a%2Fb");
	s3_buf_free(&b);
	/* Computed independently (Python hashlib). */
	CU_ASSERT(s3_md5_b64("Check Integrity!", 16, md5) == 0);
	CU_ASSERT_STRING_EQUAL(md5, "nwqq6b6ua/tTDk7B5M184w==");
	s3_amz_date(1369353600LL, date);
	CU_ASSERT_STRING_EQUAL(date, S3_DATE);
}

/* ---- credentials -------------------------------------------------------- */

static char tmpdir[] = "/tmp/mapfs-test-creds-XXXXXX";

static void env_clear(void)
{
	static const char *const vars[] = {
		"AWS_ACCESS_KEY_ID",
		"AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN",
		"AWS_REGION",
		"AWS_DEFAULT_REGION",
		"AWS_PROFILE",
		"AWS_SHARED_CREDENTIALS_FILE",
		"AWS_CONFIG_FILE",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT",
		"AWS_EC2_METADATA_DISABLED",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	setenv("HOME", tmpdir, 1); /* never the real ~/.aws */
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CU_ASSERT_FATAL(f != NULL);
	fputs(text, f);
	fclose(f);
}

static void test_creds_env(void)
{
	struct s3_cred_src *src = NULL;
	struct s3_creds c = { 0 };

	env_clear();
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	CU_ASSERT_FATAL(s3_creds_open(&src) == 0);
	CU_ASSERT(s3_creds_get(src, &c) == 0);
	CU_ASSERT(c.access_key && strcmp(c.access_key, "AKIDENV") == 0);
	CU_ASSERT(c.secret_key && strcmp(c.secret_key, "envsecret") == 0);
	CU_ASSERT(c.token && strcmp(c.token, "envtoken") == 0);
	s3_creds_free(&c);
	s3_creds_close(src);
	unsetenv("AWS_SECRET_ACCESS_KEY");
	CU_ASSERT(s3_creds_open(&src) == -EINVAL);
	env_clear();
}

static void test_creds_files(void)
{
	char cred[256], conf[256], *region = NULL;
	struct s3_cred_src *src = NULL;
	struct s3_creds c = { 0 };

	env_clear();
	snprintf(cred, sizeof(cred), "%s/creds", tmpdir);
	snprintf(conf, sizeof(conf), "%s/conf", tmpdir);
	write_file(cred, "# comment\n[default]\naws_access_key_id = AKIDDEF\n"
			 "aws_secret_access_key = defsecret\n\n"
			 "[work]\n aws_access_key_id=AKIDWORK \n"
			 "aws_secret_access_key= worksecret\n"
			 "aws_session_token = worktoken\n");
	write_file(conf, "[default]\nregion = us-west-2\n"
			 "[profile work]\nregion = eu-west-3\n"
			 "[profile cfgonly]\nregion=ap-south-1\n"
			 "aws_access_key_id = AKIDCFG\naws_secret_access_key = "
			 "cfgsecret\n"
			 "[profile half]\naws_access_key_id = AKIDHALF\n");
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
	setenv("AWS_CONFIG_FILE", conf, 1);

	CU_ASSERT_FATAL(s3_creds_open(&src) == 0);
	CU_ASSERT(s3_creds_get(src, &c) == 0);
	CU_ASSERT(c.access_key && strcmp(c.access_key, "AKIDDEF") == 0 &&
		  !c.token);
	s3_creds_free(&c);
	s3_creds_close(src);
	CU_ASSERT(s3_region_resolve(NULL, &region) == 0);
	CU_ASSERT(region && strcmp(region, "us-west-2") == 0);
	free(region);

	setenv("AWS_PROFILE", "work", 1);
	CU_ASSERT_FATAL(s3_creds_open(&src) == 0);
	CU_ASSERT(s3_creds_get(src, &c) == 0);
	CU_ASSERT(c.access_key && strcmp(c.access_key, "AKIDWORK") == 0);
	CU_ASSERT(c.secret_key && strcmp(c.secret_key, "worksecret") == 0);
	CU_ASSERT(c.token && strcmp(c.token, "worktoken") == 0);
	s3_creds_free(&c);
	s3_creds_close(src);
	CU_ASSERT(s3_region_resolve(NULL, &region) == 0);
	CU_ASSERT(region && strcmp(region, "eu-west-3") == 0);
	free(region);
	/* The flag beats the environment, which beats the file. */
	setenv("AWS_DEFAULT_REGION", "ca-central-1", 1);
	CU_ASSERT(s3_region_resolve(NULL, &region) == 0);
	CU_ASSERT(region && strcmp(region, "ca-central-1") == 0);
	free(region);
	setenv("AWS_REGION", "sa-east-1", 1);
	CU_ASSERT(s3_region_resolve(NULL, &region) == 0);
	CU_ASSERT(region && strcmp(region, "sa-east-1") == 0);
	free(region);
	CU_ASSERT(s3_region_resolve("me-south-1", &region) == 0);
	CU_ASSERT(region && strcmp(region, "me-south-1") == 0);
	free(region);
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");

	/* Keys only in the config file are found there too. */
	setenv("AWS_PROFILE", "cfgonly", 1);
	CU_ASSERT_FATAL(s3_creds_open(&src) == 0);
	CU_ASSERT(s3_creds_get(src, &c) == 0);
	CU_ASSERT(c.access_key && strcmp(c.access_key, "AKIDCFG") == 0);
	s3_creds_free(&c);
	s3_creds_close(src);

	setenv("AWS_PROFILE", "half", 1);
	CU_ASSERT(s3_creds_open(&src) == -EINVAL);

	/* Nothing anywhere (metadata disabled): a clear EACCES. */
	setenv("AWS_PROFILE", "nosuch", 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	CU_ASSERT(s3_creds_open(&src) == -EACCES);
	CU_ASSERT(s3_region_resolve(NULL, &region) == 0);
	CU_ASSERT(region && strcmp(region, "us-east-1") == 0);
	free(region);
	env_clear();
}

/* A fake IMDSv2: token by PUT, then role and credentials with it. */
struct imds {
	int lfd;
	int port;
	int served, creds_served, refused;
	int expire_in; /* seconds from now for Expiration */
	pthread_t thread;
};

static void imds_answer(int fd, int status, const char *body)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 status, strlen(body));

	if (write(fd, head, (size_t)n) < 0 || write(fd, body, strlen(body)) < 0)
		return;
}

static void *imds_run(void *arg)
{
	struct imds *m = arg;

	for (;;) {
		char req[4096] = { 0 }, body[512], when[32];
		size_t len = 0;
		ssize_t n;
		int fd = accept(m->lfd, NULL, NULL);
		bool token;
		time_t exp;

		if (fd < 0)
			return NULL;
		while (len < sizeof(req) - 1 && !strstr(req, "\r\n\r\n")) {
			n = read(fd, req + len, sizeof(req) - 1 - len);
			if (n <= 0)
				break;
			len += (size_t)n;
		}
		m->served++;
		token = strcasestr(req,
				   "\r\nX-aws-ec2-metadata-token: TOKEN-1\r\n");
		if (strncmp(req, "PUT /latest/api/token ", 22) == 0 &&
		    strcasestr(req, "X-aws-ec2-metadata-token-ttl-seconds:")) {
			imds_answer(fd, 200, "TOKEN-1");
		} else if (!token) {
			m->refused++;
			imds_answer(fd, 401, "");
		} else if (strncmp(req,
				   "GET "
				   "/latest/meta-data/iam/security-credentials/"
				   " ",
				   48) == 0) {
			imds_answer(fd, 200, "role-a\n");
		} else if (strncmp(req,
				   "GET "
				   "/latest/meta-data/iam/security-credentials/"
				   "role-a ",
				   54) == 0) {
			exp = time(NULL) + m->expire_in;
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ",
				 gmtime(&exp));
			m->creds_served++;
			snprintf(body, sizeof(body),
				 "{\n  \"Code\" : \"Success\",\n  \"Type\" : "
				 "\"AWS-HMAC\",\n"
				 "  \"AccessKeyId\" : \"ASIA%d\",\n"
				 "  \"SecretAccessKey\" : \"sec\\/ret%d\",\n"
				 "  \"Token\" : \"tok%d\",\n  \"Expiration\" : "
				 "\"%s\"\n}\n",
				 m->creds_served, m->creds_served,
				 m->creds_served, when);
			imds_answer(fd, 200, body);
		} else {
			imds_answer(fd, 404, "");
		}
		close(fd);
	}
}

static void test_creds_imds(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	struct imds m = { .expire_in = 3600 };
	struct s3_cred_src *src = NULL;
	struct s3_creds c = { 0 };
	char ep[64];

	env_clear();
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	m.lfd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(m.lfd >= 0);
	CU_ASSERT_FATAL(bind(m.lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL(listen(m.lfd, 8) == 0);
	CU_ASSERT_FATAL(getsockname(m.lfd, (struct sockaddr *)&a, &alen) == 0);
	CU_ASSERT_FATAL(pthread_create(&m.thread, NULL, imds_run, &m) == 0);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d/", ntohs(a.sin_port));
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", ep, 1);

	CU_ASSERT_FATAL(s3_creds_open(&src) == 0);
	CU_ASSERT(s3_creds_get(src, &c) == 0);
	CU_ASSERT(c.access_key && strcmp(c.access_key, "ASIA1") == 0);
	CU_ASSERT(c.secret_key && strcmp(c.secret_key, "sec/ret1") == 0);
	CU_ASSERT(c.token && strcmp(c.token, "tok1") == 0);
	s3_creds_free(&c);
	/* Far from expiry: no new fetch. */
	CU_ASSERT(s3_creds_get(src, &c) == 0);
	CU_ASSERT(m.creds_served == 1);
	s3_creds_free(&c);
	/* Told the token expired: the next get fetches a new set. */
	m.expire_in = 120; /* inside the refresh window from now on */
	s3_creds_expire(src);
	CU_ASSERT(s3_creds_get(src, &c) == 0);
	CU_ASSERT(c.access_key && strcmp(c.access_key, "ASIA2") == 0);
	s3_creds_free(&c);
	/* Expiring within five minutes: refreshed before use. */
	CU_ASSERT(s3_creds_get(src, &c) == 0);
	CU_ASSERT(c.access_key && strcmp(c.access_key, "ASIA3") == 0);
	CU_ASSERT(m.creds_served == 3 && m.refused == 0);
	s3_creds_free(&c);
	s3_creds_close(src);

	shutdown(m.lfd, SHUT_RDWR);
	close(m.lfd);
	pthread_join(m.thread, NULL);
	/* Nobody answering: no credentials. */
	CU_ASSERT(s3_creds_open(&src) == -EACCES);
	env_clear();
}

int main(void)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{ "aws-sig-v4-test-suite vectors", test_suite_vectors },
		{ "S3 documentation examples", test_s3_doc_examples },
		{ "canonical query", test_query_canonical },
		{ "copy-source-range order", test_copy_source_range_order },
		{ "bad input", test_bad_input },
		{ "encoding and digests", test_encoding_and_digests },
		{ "credentials from the environment", test_creds_env },
		{ "credentials from shared files", test_creds_files },
		{ "credentials from instance metadata", test_creds_imds },
	};
	CU_pSuite cs;
	unsigned failed;

	if (!mkdtemp(tmpdir))
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	cs = CU_add_suite("s3_sign", NULL, NULL);
	for (size_t i = 0; cs && i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!CU_add_test(cs, tests[i].name, tests[i].fn))
			cs = NULL;
	if (!cs) {
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	{
		char path[256];

		snprintf(path, sizeof(path), "%s/creds", tmpdir);
		unlink(path);
		snprintf(path, sizeof(path), "%s/conf", tmpdir);
		unlink(path);
		rmdir(tmpdir);
	}
	return failed ? 1 : 0;
}
