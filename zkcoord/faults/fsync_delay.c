/* LD_PRELOAD shim for zkcoord's fault injection (zkcoord/faults/fsync.py): fsync and fdatasync sleep first.
 *
 * While the file named by $ZKCOORD_FSYNC_DELAY_FILE exists and holds a number, each call sleeps that many
 * milliseconds before the real call. The file is read on every call, so the nemesis slows and heals a running
 * process by writing or removing it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long delay_ms(void) {
    const char *path = getenv("ZKCOORD_FSYNC_DELAY_FILE");
    if (path == NULL || *path == '\0') return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[32];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = '\0';
    long ms = strtol(text, NULL, 10);
    return ms > 0 ? ms : 0;
}

static void sleep_first(void) {
    int saved = errno;
    long ms = delay_ms();
    if (ms > 0) {
        struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&left, &left) != 0 && errno == EINTR) {
        }
    }
    errno = saved;
}

int fsync(int fd) {
    static int (*real_fsync)(int);
    if (real_fsync == NULL) real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    sleep_first();
    return real_fsync(fd);
}

int fdatasync(int fd) {
    static int (*real_fdatasync)(int);
    if (real_fdatasync == NULL) real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    sleep_first();
    return real_fdatasync(fd);
}
