/* --help and the manual page, both generated from the settings table so they cannot drift. */
#ifndef STAGEDRAIN_USAGE_H
#define STAGEDRAIN_USAGE_H

#include <stdio.h>

#include "commands.h"

/* Prints usage with every setting, its variable and default. */
void config_usage(FILE *out);
/* Prints one operator command's synopsis, summary and options. */
void command_usage(FILE *out, const struct command_doc *c);
/* Prints every operator command whose name is prefix or starts with "prefix ": how many. */
int commands_usage(FILE *out, const char *prefix);
/* Prints the manual page (mdoc) from the same table, so it cannot drift from --help. */
void config_man(FILE *out, const char *date, const char *version);

#endif
