/* Stopping signals and numaprof record's control socket.
 *
 * The program must get each SIGINT/SIGTERM/SIGHUP/SIGQUIT exactly as in a plain run.  A
 * signal sent to the process group (Ctrl-C at a terminal, kill -TERM -PGID, a batch
 * system, timeout) reaches numaprof record, numaprof-collect and the program at once (the
 * program only if it stayed in the group, as in a plain run); a signal sent to numaprof
 * record's pid reaches only numaprof record.  numaprof record relays every one it gets
 * through the control socket, and the collector also sees the group's signals directly.
 * So a relayed signal that the collector received directly too was a group signal and is
 * not passed on; any other relayed signal was meant for numaprof record alone and is.
 */
#include "nmp_collector.h"

#include <errno.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define RELAY_MATCH_NS 5000000000ULL /* a direct signal this old is not matched any more */

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGUSR2: return "SIGUSR2"; /* record -p --switch-output: end this slice */
    }
    return "signal";
}

static int is_stopping(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

void nmp_status_from_wait(struct nmp_run *run, int st)
{
    run->have_status = 1;
    if (WIFEXITED(st)) {
        run->exit_status = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
        run->term_signal = WTERMSIG(st);
        run->exit_status = 128 + run->term_signal;
    }
}

/* A stopping signal received directly: through the process group (a signal sent to
 * numaprof-collect's pid alone is taken for one too: that pid is not numaprof's
 * advertised one).  numaprof record's relay of it follows and is matched against it. */
static void on_direct(struct nmp_collector *c, int sig)
{
    c->run.interrupted = signal_name(sig);
    c->relay.direct_unmatched[sig]++;
    c->relay.direct_time[sig] = nmp_now_ns();
}

/* numaprof record got `sig`.  If it came through the process group, the collector got it
 * too: the kernel delivers a group signal to every member under tasklist_lock held for
 * reading (kernel/signal.c, kill_something_info and kill_pgrp), and setpgid() takes that
 * lock for writing (kernel/sys.c, ksys_setpgid), so after the setpgid below a group
 * signal that reached numaprof record before it relayed it is pending here too. */
static void on_relayed(struct nmp_collector *c, int sfd, int sig, int *done)
{
    if (sig <= 0 || sig >= NSIG)
        return;
    if (setpgid(0, getpgrp()) != 0)
        nmp_debug("setpgid: %s", strerror(errno));
    nmp_signals_read(c, sfd, done);
    c->run.interrupted = signal_name(sig);
    struct nmp_relay *r = &c->relay;
    if (r->direct_unmatched[sig] && nmp_now_ns() - r->direct_time[sig] < RELAY_MATCH_NS) {
        r->direct_unmatched[sig]--; /* a group signal: already dealt with in on_direct */
        return;
    }
    r->direct_unmatched[sig] = 0;
    if (c->cfg->attach_pid > 0)
        *done = 1; /* stop profiling; leave the process alone */
    else
        kill(c->run.root, sig); /* sent to numaprof record's pid only */
}

void nmp_signals_read(struct nmp_collector *c, int sfd, int *done)
{
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        if (is_stopping(sig)) {
            if (c->cfg->attach_pid > 0) {
                c->run.interrupted = signal_name(sig);
                *done = 1;
            } else {
                on_direct(c, sig);
            }
        } else if (sig == SIGCHLD && c->cfg->attach_pid <= 0) {
            int st;
            pid_t w = waitpid(c->run.root, &st, WNOHANG);
            if (w == c->run.root) {
                nmp_status_from_wait(&c->run, st);
                *done = 1;
            } else if (w < 0 && errno == ECHILD && c->run.have_status) {
                *done = 1; /* reaped already, by the wait of a ptrace stop (threads.c) */
            }
        }
    }
}

/* One byte per signal numaprof record received; end of file when numaprof record is gone
 * (killed): the recording stops and the program goes on. */
void nmp_control_read(struct nmp_collector *c, int sfd, int *done)
{
    unsigned char buf[64];
    for (;;) {
        ssize_t n = recv(c->cfg->control_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            c->run.cli_gone = 1;
            if (!c->run.interrupted)
                c->run.interrupted = "numaprof record ended";
            *done = 1;
            return;
        }
        for (ssize_t i = 0; i < n; i++)
            on_relayed(c, sfd, buf[i], done);
    }
}
