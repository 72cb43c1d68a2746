/* Feature-test macros: included first by every .c so all see one POSIX level. */
#ifndef STAGEDRAIN_FMACROS_H
#define STAGEDRAIN_FMACROS_H

#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1

#define SD_MUSTCHECK __attribute__((warn_unused_result))
#define SD_PRINTF(f, a) __attribute__((format(printf, f, a)))

#endif
