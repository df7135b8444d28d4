/* progress.c: the stderr progress bar of progress.h. */
#include "progress.h"

#include <stdio.h>
#include <unistd.h>

#define BAR_WIDTH 40

int progress_enabled(void)
{
	return isatty(STDERR_FILENO);
}

void progress_draw(const char *label, double fraction)
{
	if (fraction < 0)
		fraction = 0;
	if (fraction > 1)
		fraction = 1;
	int fill = (int)(fraction * BAR_WIDTH);
	char bar[BAR_WIDTH + 1];
	for (int i = 0; i < BAR_WIDTH; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[BAR_WIDTH] = '\0';
	fprintf(stderr, "\r%-18s [%s] %3d%%", label, bar,
		(int)(fraction * 100));
	fflush(stderr);
}

void progress_clear(void)
{
	fprintf(stderr, "\r\033[K");
	fflush(stderr);
}
