/* pattern.h: the data the write items store and the read items check.
 *
 * Every 4 KiB page of a file starts with a 16-byte stamp (the file's tag and
 * the page's offset) followed by a fixed pseudo-random filler, so a block
 * that comes back from the wrong file, the wrong offset or half-written is
 * caught, and filling a block costs one memcpy per page.
 */
#ifndef MAPFS_BENCH_PATTERN_H
#define MAPFS_BENCH_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#define PATTERN_PAGE 4096u

/* Writes into buf the len bytes of file tag's pattern starting at off. */
void pattern_fill(char *buf, uint64_t tag, uint64_t off, size_t len);

/* Rewrites only the page stamps of a buf that pattern_fill() filled once at
 * any page-aligned offset: the filler is the same on every page, so a writer
 * reuses its buffer for the next block at the cost of 16 bytes per page.
 * off must be page-aligned. */
void pattern_stamp(char *buf, uint64_t tag, uint64_t off, size_t len);

/* Checks buf against the pattern; returns -1 and the file offset of the
 * first wrong byte in *bad, or 0 when all len bytes match. */
int pattern_check(const char *buf, uint64_t tag, uint64_t off, size_t len,
		  uint64_t *bad);

#endif
