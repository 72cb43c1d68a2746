/* Prints the manual page from the settings table: a build step, so the page cannot drift from --help. */
#include "fmacros.h"

#include <stdio.h>
#include <stdlib.h>

#include "usage.h"
#include "version.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fputs("usage: gen_man 'Month D, YYYY' > stagedrain.1\n", stderr);
		return 2;
	}
	config_man(stdout, argv[1], STAGEDRAIN_VERSION);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
