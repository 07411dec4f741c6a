/* The floor of a compiled loop for PUB round trips: bench/floor.py's server in C (its
 * --server c builds it with cc -O2). One epoll set served pass after pass: every ready socket
 * read, its whole PUBs, MPUBs and IDENTIFYs answered OK in one write, then a spin of up to argv[2]
 * microseconds (epoll_wait(0), sched_yield) before it sleeps. No engine, no storage.
 *     floor <port> [spin-us] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 65536
#define BUF 65536
static char *pend[MAXFD];
static size_t plen[MAXFD];
static const char OK[10] = {0, 0, 0, 6, 0, 0, 0, 0, 'O', 'K'};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t pubs(const char *b, size_t end, int *count) {
    size_t pos = (end >= 4 && memcmp(b, "  V2", 4) == 0) ? 4 : 0;
    *count = 0;
    while (pos < end) {
        const char *nl = memchr(b + pos, '\n', end - pos);
        if (!nl) break;
        size_t n = nl - b;
        int pub = end - pos >= 4 && memcmp(b + pos, "PUB ", 4) == 0;
        int mpub = end - pos >= 5 && memcmp(b + pos, "MPUB ", 5) == 0;
        int identify = end - pos >= 8 && memcmp(b + pos, "IDENTIFY", 8) == 0;
        if (!pub && !mpub && !identify) { pos = n + 1; continue; }
        if (n + 5 > end) break;
        uint32_t size = ((uint8_t)b[n + 1] << 24) | ((uint8_t)b[n + 2] << 16) | ((uint8_t)b[n + 3] << 8) | (uint8_t)b[n + 4];
        if (n + 5 + size > end) break;
        pos = n + 5 + size;
        (*count)++;
    }
    return pos;
}

int main(int argc, char **argv) {
    int port = atoi(argv[1]);
    double spin = argc > 2 ? atof(argv[2]) * 1e-6 : 100e-6;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 256)) return 1;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls}, evs[256];
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    static char buf[BUF * 2], out[BUF];
    int n = 0;
    for (;;) {
        if (n <= 0) n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                int c = accept4(ls, NULL, NULL, SOCK_NONBLOCK);
                if (c < 0) continue;
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                continue;
            }
            size_t have = plen[fd];
            if (have > BUF) { epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL); close(fd); plen[fd] = 0; continue; }
            if (have) memcpy(buf, pend[fd], have);
            ssize_t r = read(fd, buf + have, BUF);
            if (r < 0 && errno == EAGAIN) continue;
            if (r <= 0) { epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL); close(fd); plen[fd] = 0; continue; }
            size_t end = have + r;
            int count;
            size_t pos = pubs(buf, end, &count);
            plen[fd] = end - pos;
            if (plen[fd]) { pend[fd] = realloc(pend[fd], plen[fd]); memcpy(pend[fd], buf + pos, plen[fd]); }
            if (count) {
                for (int k = 0; k < count && (k + 1) * 10 <= BUF; k++) memcpy(out + k * 10, OK, 10);
                (void)!write(fd, out, count * 10);
            }
        }
        double stop = now() + spin;
        for (;;) {
            n = epoll_wait(ep, evs, 256, 0);
            if (n > 0 || now() >= stop) break;
            sched_yield();
        }
    }
}
