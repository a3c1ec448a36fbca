/* A server that answers every remoting request at once with success and does nothing else: the
 * floor of open_loop_latency.py --floor (what the generator, the loopback and the scheduler of this
 * machine leave of a latency percentile with no broker behind them).
 *
 *     cc -O2 -o null_remoting_server perf/null_remoting_server.c && ./null_remoting_server PORT
 *
 * On 127.0.0.1:PORT, one connection at a time; per read, every complete frame (docs/protocol.md#frame:
 * int32 total_length, int32 serialize_type << 24 | header_length, JSON header, body) is answered
 * with {"code":0,"opaque":N,"flag":1}, N copied from the request's header, and the answers of one
 * read go out with one send. Stops on SIGTERM.
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_SIZE (1 << 20)
#define MAX_FRAME (16 << 20)
#define ANSWER_MAX 64

static int send_all(int fd, const char *at, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, at, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        at += w;
        n -= (size_t)w;
    }
    return 0;
}

static unsigned be32(const unsigned char *p) {
    return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3];
}

static void serve(int fd) {
    char *in = malloc(MAX_FRAME + READ_SIZE), *out = malloc(READ_SIZE / 8 * ANSWER_MAX);
    size_t have = 0;
    for (;;) {
        ssize_t got = recv(fd, in + have, READ_SIZE, 0);
        if (got <= 0)
            break;
        have += (size_t)got;
        size_t pos = 0, out_len = 0;
        while (have - pos >= 8) {
            unsigned total = be32((unsigned char *)in + pos), header = be32((unsigned char *)in + pos + 4) & 0xFFFFFF;
            if (total < 4 + header || total > MAX_FRAME)
                goto done;
            if (have - pos < 4 + (size_t)total)
                break;
            const char *h = in + pos + 8, *key = memmem(h, header, "\"opaque\":", 9);
            long long opaque = key ? atoll(key + 9) : 0;
            char json[ANSWER_MAX - 8];
            int n = snprintf(json, sizeof json, "{\"code\":0,\"opaque\":%lld,\"flag\":1}", opaque);
            unsigned char *a = (unsigned char *)out + out_len;
            unsigned t = htonl(4 + (unsigned)n), l = htonl((unsigned)n);
            memcpy(a, &t, 4);
            memcpy(a + 4, &l, 4);
            memcpy(a + 8, json, (size_t)n);
            out_len += 8 + (size_t)n;
            pos += 4 + (size_t)total;
        }
        if (out_len && send_all(fd, out, out_len) < 0)
            break;
        memmove(in, in + pos, have - pos);
        have -= pos;
    }
done:
    free(in);
    free(out);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(s, 16) < 0) {
        perror("bind/listen");
        return 1;
    }
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0)
            continue;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        serve(c);
        close(c);
    }
}
