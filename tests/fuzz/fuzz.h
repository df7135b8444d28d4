/*
 * tests/fuzz/fuzz.h - what the fuzz targets and the corpus generator share.
 *
 * A fuzz target is a libFuzzer entry point, LLVMFuzzerTestOneInput(); a
 * broken invariant calls FUZZ_CHECK, which aborts, so libFuzzer saves the
 * input as a crash like any sanitizer report.
 */
#ifndef MAPFS_FUZZ_H
#define MAPFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nfsd/handle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                 \
	do {                                                             \
		if (!(cond)) {                                           \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", \
				__FILE__, __LINE__, #cond);              \
			abort();                                         \
		}                                                        \
	} while (0)

/*
 * The handle secret of every target and seed: fixed, so that the seeds'
 * handles carry a valid MAC and the fuzzer gets past handle_decode().
 */
static const struct handle_key fuzz_key = { {
	0x6d,
	0x61,
	0x70,
	0x66,
	0x73,
	0x2d,
	0x67,
	0x77,
	0x2d,
	0x66,
	0x75,
	0x7a,
	0x7a,
	0x6b,
	0x65,
	0x79,
} };

/* The export id of the seeds' handles. */
#define FUZZ_EXPORT_ID 7u

#endif
