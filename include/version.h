/* The release, shown by --version and in the manual page. */
#ifndef STAGEDRAIN_VERSION_H
#define STAGEDRAIN_VERSION_H

#ifndef STAGEDRAIN_VERSION
#define STAGEDRAIN_VERSION "0.1.0"
#endif

#endif
