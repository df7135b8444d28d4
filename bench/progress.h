/* progress.h: a one-line progress bar on stderr, drawn only on a terminal so
 * that logs and CI output stay clean. */
#ifndef MAPFS_BENCH_PROGRESS_H
#define MAPFS_BENCH_PROGRESS_H

/* Whether bars will be drawn (stderr is a TTY). */
int progress_enabled(void);

/* Redraws the bar for label at fraction done (clamped to 0..1). */
void progress_draw(const char *label, double fraction);

/* Erases the bar, leaving the cursor at the start of an empty line. */
void progress_clear(void);

#endif
