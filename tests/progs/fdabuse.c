/* A program that does to descriptors what daemons and launchers do (tests/test_record_faults.py).
 *   fdabuse close N            closes every descriptor >= 3, then allocates
 *   fdabuse dup2 FILE N        dup2()s FILE (opened read-write) onto every descriptor from
 *                              3 to 767, open or not, then allocates, then closes them
 * "Allocates" is N blocks of 3 MiB, each touched and freed: 2 N records of the allocation
 * shim, more than its first mapped chunks hold.  Prints "done N". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK (3u << 20)

static void allocate(long n)
{
    for (long i = 0; i < n; i++) {
        volatile char *p = malloc(BLOCK);
        if (!p)
            exit(3);
        p[i % BLOCK] = 1;
        free((void *)p);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "close") == 0) {
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
        allocate(atol(argv[2]));
    } else if (argc == 4 && strcmp(argv[1], "dup2") == 0) {
        int f = open(argv[2], O_RDWR);
        if (f < 0)
            return 2;
        for (int fd = 3; fd < 768; fd++)
            if (fd != f)
                dup2(f, fd);
        allocate(atol(argv[3]));
        for (int fd = 3; fd < 768; fd++)
            close(fd);
    } else {
        return 2;
    }
    printf("done %s\n", argv[argc - 1]);
    return 0;
}
