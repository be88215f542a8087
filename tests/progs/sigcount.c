/* Counts the stopping signals it receives (tests/test_record_faults.py).
 *   sigcount DIR [leave-group]
 * Writes DIR/ready once its handlers are installed and DIR/count ("INT n TERM n HUP n
 * QUIT n") after every signal; exits 0 when DIR/stop appears, printing the same line.
 * With leave-group it first moves to a process group of its own. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t counts[4];
static const int sigs[4] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void on_signal(int sig)
{
    for (int i = 0; i < 4; i++)
        if (sigs[i] == sig)
            counts[i]++;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (argc > 2 && strcmp(argv[2], "leave-group") == 0)
        setpgid(0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 4; i++)
        sigaction(sigs[i], &sa, NULL);
    write_file(argv[1], "ready", "ready\n");
    char stop[4096], line[128] = "";
    snprintf(stop, sizeof stop, "%s/stop", argv[1]);
    int seen = 0;
    for (;;) {
        int total = counts[0] + counts[1] + counts[2] + counts[3];
        snprintf(line, sizeof line, "INT %d TERM %d HUP %d QUIT %d\n", (int)counts[0],
                 (int)counts[1], (int)counts[2], (int)counts[3]);
        if (total != seen) {
            write_file(argv[1], "count", line);
            seen = total;
        }
        if (access(stop, F_OK) == 0)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fputs(line, stdout);
    return 0;
}
