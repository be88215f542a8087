/* Assertion macros shared by the C tests: a failed check prints where and what, counts a
 * failure, and the test goes on; main() returns non-zero when `failures` is set. */
#ifndef NMP_CHECK_H
#define NMP_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int failures;

#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);   \
            failures++;                                                             \
        }                                                                           \
    } while (0)
#define CHECK_EQ(a, b)                                                              \
    do {                                                                            \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b); \
        if (a_ != b_) {                                                             \
            fprintf(stderr, "%s:%d: %s = %#llx, expected %#llx\n", __FILE__, __LINE__, \
                    #a, a_, b_);                                                    \
            failures++;                                                             \
        }                                                                           \
    } while (0)

/* CHECK with a printf-style explanation of what went wrong. */
#define CHECK_MSG(c, ...)                                                           \
    do {                                                                            \
        if (!(c)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #c);   \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            failures++;                                                             \
        }                                                                           \
    } while (0)

/* An empty directory for a test's files: $NMP_TEST_TMP (or /tmp)/<name>, its path in
 * `dir` (`len` bytes). */
static inline void check_fresh_dir(char *dir, size_t len, const char *name)
{
    const char *tmp = getenv("NMP_TEST_TMP");
    snprintf(dir, len, "%s/%s", tmp ? tmp : "/tmp", name);
    char cmd[2 * 4096 + 64];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0)
        abort();
}

/* main()'s exit status: 0, or 1 after printing how many checks failed. */
static inline int check_result(void)
{
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}

#endif
