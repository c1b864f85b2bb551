/*
 * rg-run: start one step of a grading job as an unprivileged, confined child and report how it ended.
 *
 * The driver script runs as (sandbox) root and calls this once per step. The parent stays root, so
 * the program cannot signal it, and reports the child's exact wait status and resource use on a
 * descriptor the child never holds. Afterwards it kills every process left with the slot's uid
 * (each grader slot has its own uid on this host, so that is exactly this job's leftovers).
 * The child, before exec:
 *   - gets its rlimits (CPU, address space, stack, processes, file size, open files, no core),
 *   - closes every descriptor but stdin/stdout/stderr,
 *   - resets every signal's action to the default and unblocks them all (nothing inherited),
 *   - drops to the slot uid with no groups, sets no_new_privs and installs a seccomp filter
 *     that refuses namespace, mount, ptrace, keyring, bpf and similar host-facing calls, and any
 *     socket but a local (AF_UNIX) one.
 *
 * With RG_NO_PROCESSES in its environment (test runs) the child may create threads but no
 * processes and may not exec: its binary is started with execveat, which safe Rust cannot call.
 * Nor may it replace or close stdin/stdout/stderr, or map memory writable and executable.
 *
 * With RG_FRESH_NS=WORK_DIR as well (test runs in the bubblewrap sandbox, where the driver
 * holds CAP_SYS_ADMIN), the run gets kernel state of its own, so that no run can leave anything
 * for a later one to read (the programs of a batch run one after another in one sandbox): a new
 * pid namespace (pids count from 1 again, whatever threads an earlier run started), ipc namespace
 * (no System V segment survives) and mount namespace, where a fresh size-capped tmpfs covers the
 * work dir (a fresh inode counter; what the driver kept there, the nonce's directory and the sealed
 * binaries, is bound back in), and /proc is covered by an empty read-only tmpfs (its inode numbers
 * come from a host-wide counter, and its machine-wide files are shared state). Run steps also get no
 * pipe or socket, whose inode numbers come from that counter too (forbid_processes).
 * The child is then the namespace's init: it sets this up as root, starts the program as a
 * grandchild, waits for it and hands its exact wait status up on a pipe.
 *
 * If the child cannot set itself up (a limit, the uid, the filter, exec), that is the sandbox's fault,
 * not the program's: it says why on a close-on-exec pipe that the program never holds, and the report
 * gets a "fault" line. An exit status alone could not tell the two apart (a program can exit 126).
 *
 * usage: rg-run REPORT_FD NAME UID AS_MB CPU_S NPROC FSIZE_MB NOFILE STACK_MB CWD -- ARGV...
 *   UID -1 keeps the current uid; CWD "-" stays put (else the child enters it after dropping
 *   privileges). Report lines: "stat NAME EXIT SIGNAL CPU_MS MAXRSS_KB", and before it
 *   "fault NAME REASON..." when the child failed before the program started.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#if defined(__x86_64__)
#define RG_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define RG_ARCH AUDIT_ARCH_AARCH64
#else
#error "rg-run knows the seccomp architecture of x86_64 and aarch64 only"
#endif

#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP)
#define DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)

static int fault_fd = -1; /* in the child: the write end of the close-on-exec fault pipe */

static void die(const char *what) {
    const char *why = strerror(errno);
    fprintf(stderr, "rg-run: %s: %s\n", what, why);
    if (fault_fd >= 0) dprintf(fault_fd, "%s: %s", what, why);
    _exit(126);
}

/* The low 32 bits of a syscall argument (both supported architectures are little-endian) */
#define ARG_LO(n) (offsetof(struct seccomp_data, args[n]))
/* syscall nr: its argument n must be a descriptor above 2, else EPERM */
#define ABOVE_STDIO(nr, n)                                                                                       \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 4), BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(n)),             \
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 2, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),              \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)
/* syscall nr: its protection argument n may not be writable and executable at once */
#define NOT_WX(nr, n)                                                                                            \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 5), BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(n)),             \
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_WRITE | PROT_EXEC),                                          \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_WRITE | PROT_EXEC, 0, 1),                                    \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/* Run steps may start threads but no processes, and exec nothing: a test that could run its own
 * (exec-only) binary again, as a child or in its own place, could run the sentinel alone, read the
 * nonce and forge the whole run.
 * Nor may they put another file behind stdin, stdout or stderr (dup2/dup3 onto them, closing them so
 * the next descriptor lands there), or make memory writable and executable at once (or get a memfd
 * to map twice): safe Rust never needs either, and an exploit of a compiler soundness hole that
 * gained arbitrary memory access would need them to put a relay in front of libtest's output or run
 * code of its own. */
static void forbid_processes(void) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__NR_dup2)
        ABOVE_STDIO(__NR_dup2, 1),
#endif
        ABOVE_STDIO(__NR_dup3, 1),
        ABOVE_STDIO(__NR_close, 0),
        ABOVE_STDIO(__NR_close_range, 0),
        NOT_WX(__NR_mmap, 2),
        NOT_WX(__NR_mprotect, 2),
        NOT_WX(__NR_pkey_mprotect, 2),
        DENY(__NR_memfd_create),
        /* pipes and sockets take their inode numbers from the kernel's host-wide counter: one run
         * could move it and the next (a batch's next program) read it. A test needs neither. */
#if defined(__NR_pipe)
        DENY(__NR_pipe),
#endif
        DENY(__NR_pipe2),
        DENY(__NR_socket),
        DENY(__NR_socketpair),
#if defined(__NR_fork)
        DENY(__NR_fork),
#endif
#if defined(__NR_vfork)
        DENY(__NR_vfork),
#endif
        DENY(__NR_execve),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) die("seccomp");
}

static void install_seccomp(void) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, RG_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* x32 ABI */
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
#endif
        /* clone3 hides its flags behind a pointer: say it does not exist, libc falls back to clone */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NS_FLAGS, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* sockets: local (AF_UNIX) only, so not even the rlimits fallback reaches a network */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        DENY(__NR_unshare), DENY(__NR_setns), DENY(__NR_mount), DENY(__NR_umount2), DENY(__NR_pivot_root),
        DENY(__NR_chroot), DENY(__NR_ptrace), DENY(__NR_process_vm_readv), DENY(__NR_process_vm_writev),
        DENY(__NR_keyctl), DENY(__NR_add_key), DENY(__NR_request_key), DENY(__NR_bpf), DENY(__NR_perf_event_open),
        DENY(__NR_userfaultfd), DENY(__NR_kexec_load), DENY(__NR_init_module), DENY(__NR_finit_module),
        DENY(__NR_delete_module), DENY(__NR_open_by_handle_at), DENY(__NR_name_to_handle_at), DENY(__NR_fsopen),
        DENY(__NR_fsconfig), DENY(__NR_fsmount), DENY(__NR_fspick), DENY(__NR_move_mount), DENY(__NR_open_tree),
        DENY(__NR_mount_setattr), DENY(__NR_io_uring_setup), DENY(__NR_io_uring_enter), DENY(__NR_io_uring_register),
        DENY(__NR_acct), DENY(__NR_swapon), DENY(__NR_swapoff), DENY(__NR_reboot), DENY(__NR_syslog),
        DENY(__NR_quotactl), DENY(__NR_personality),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) die("seccomp");
}

/* Every signal back to its default action, none blocked: dispositions set to "ignore" and the mask
 * survive exec, and the host's Python ignores SIGXFSZ and SIGPIPE, so without this a file over the
 * size limit would be a write error (a compiler's "unknown error") instead of the SIGXFSZ that says
 * which limit was hit, and a program could inherit a blocked SIGXCPU. */
static void reset_signals(void) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, NULL); /* glibc's reserved ones refuse: fine */
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) != 0) die("sigprocmask");
}

static void limit2(int resource, rlim_t soft, rlim_t hard) {
    struct rlimit rl = {soft, hard};
    if (setrlimit(resource, &rl) != 0) die("setrlimit");
}

static void limit(int resource, rlim_t value) {
    struct rlimit rl = {value, value};
    if (setrlimit(resource, &rl) != 0) die("setrlimit");
}

/* rg-run seal UID SRC DST: the compiler's output SRC (a regular file of UID with one link) becomes
 * root-owned, mode 0111, and moves to DST in a root-owned 0711 directory. The program may execute
 * it but not read it (which also makes it non-dumpable), replace it or name its directory's files. */
static int seal(long uid, const char *src, const char *dst) {
    int fd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 3 : (die(src), 1);
    struct stat st;
    if (fstat(fd, &st) != 0) die(src);
    if (!S_ISREG(st.st_mode) || st.st_uid != (uid_t)uid || st.st_nlink != 1) {
        fprintf(stderr, "rg-run: %s is not the compiler's output\n", src);
        return 4;
    }
    if (fchown(fd, 0, 0) != 0 || fchmod(fd, 0111) != 0) die("seal");
    close(fd);
    char dir[4096];
    if (strlen(dst) >= sizeof(dir)) return 5;
    strcpy(dir, dst);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir) return 5;
    *slash = 0;
    struct stat d;
    if (mkdir(dir, 0711) != 0 && errno != EEXIST) die(dir);
    if (lstat(dir, &d) != 0 || !S_ISDIR(d.st_mode) || d.st_uid != 0 || (d.st_mode & 022)) die("sealed dir not ours");
    if (rename(src, dst) != 0) die("rename");
    return 0;
}

/* The run's own work dir and /proc (see the header), set up in a new mount namespace by its init. */
static void fresh_mounts(const char *work) {
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("private mounts");
    int old = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (old < 0) die(work);
    struct statfs fs; /* the new tmpfs is as large as the sandbox's own */
    if (fstatfs(old, &fs) != 0) die("statfs");
    char opts[64];
    snprintf(opts, sizeof(opts), "size=%llu,mode=1777", (unsigned long long)fs.f_blocks * (unsigned long long)fs.f_bsize);
    if (mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) die("work tmpfs");
    int listing = dup(old);
    DIR *dir = listing >= 0 ? fdopendir(listing) : NULL;
    if (dir == NULL) die("work listing");
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        struct stat st;
        if (fstatat(old, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) die(entry->d_name);
        char source[4200], target[4200];
        snprintf(source, sizeof(source), "/proc/self/fd/%d/%s", old, entry->d_name);
        snprintf(target, sizeof(target), "%s/%s", work, entry->d_name);
        if (S_ISDIR(st.st_mode)) {
            if (mkdir(target, 0700) != 0) die(target);
        } else {
            int made = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (made < 0) die(target);
            close(made);
        }
        if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) != 0) die("bind kept entry");
    }
    closedir(dir);
    close(old);
}

/* A test run sees no /proc at all (an empty read-only tmpfs over it): /proc's inode numbers come from
 * a host-wide counter, as its machine-wide files (stat, loadavg, sys) are shared state, and its
 * mountinfo names the host paths the sandbox's binds come from. Test binaries need none of it. */
static void hide_proc(void) {
    if (mount("tmpfs", "/proc", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") != 0)
        die("hide /proc");
}

/* The root side keeps only what it uses: switching uid, killing, sealing binaries (chown, fowner, dac
 * override) and each run's namespaces and mounts (sys_admin). A root exec gets the bounding set back
 * as its capabilities, and bubblewrap leaves that set whole; dropped here, nothing rg-run starts
 * (the run's init included) can hold more. The program holds none at all (it runs as the slot uid). */
static void keep_needed_capabilities(void) {
    const unsigned long long keep = (1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_FOWNER) |
                                    (1ULL << CAP_KILL) | (1ULL << CAP_SETGID) | (1ULL << CAP_SETUID) |
                                    (1ULL << CAP_SYS_ADMIN);
    if (geteuid() != 0) return;
    for (int cap = 0; cap <= 63; cap++)
        if (!(keep & (1ULL << cap)) && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1) (void)prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &header, data) != 0) return;
    for (int i = 0; i < 2; i++) {
        unsigned int mask = (unsigned int)(keep >> (32 * i));
        data[i].effective &= mask;
        data[i].permitted &= mask;
        data[i].inheritable = 0;
    }
    (void)syscall(SYS_capset, &header, data);
}

/* Close every descriptor from 3 up but keep_a and keep_b (keep_a <= keep_b; equal to keep one). */
static void close_except(int keep_a, int keep_b) {
    if (keep_a > 3) syscall(SYS_close_range, 3, keep_a - 1, 0);
    if (keep_b > keep_a + 1) syscall(SYS_close_range, keep_a + 1, keep_b - 1, 0);
    syscall(SYS_close_range, keep_b + 1, ~0U, 0);
}

static void kill_uid(long uid) {
    /* kill(-1) as the uid itself reaches exactly that uid's processes (in this pid namespace and below) */
    pid_t killer = fork();
    if (killer == 0) {
        if (setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) != 0 || setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0) _exit(1);
        kill(-1, SIGKILL);
        _exit(0);
    }
    if (killer > 0) waitpid(killer, NULL, 0);
}

/* In the child: limits, uid, filter, signals, then the program (never returns). */
static void start_program(long uid, rlim_t as, rlim_t cpu, rlim_t nproc, rlim_t fsize, rlim_t nofile, rlim_t stack,
                          const char *cwd, char **program, int fresh) {
    int adj = open("/proc/self/oom_score_adj", O_WRONLY);
    if (adj >= 0) { (void)!write(adj, "1000\n", 5); close(adj); } /* the program dies first on OOM */
    if (fresh) hide_proc(); /* its own mount namespace: the init's /proc stays */
    limit(RLIMIT_AS, as);
    limit2(RLIMIT_CPU, cpu, cpu + 1); /* SIGXCPU at the limit, SIGKILL a second later if ignored */
    limit(RLIMIT_NPROC, nproc);
    limit(RLIMIT_FSIZE, fsize);
    limit(RLIMIT_NOFILE, nofile);
    limit(RLIMIT_STACK, stack);
    limit(RLIMIT_CORE, 0);
    if (uid >= 0) {
        if (setgroups(0, NULL) != 0) die("setgroups");
        if (setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) != 0) die("setgid");
        if (setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0) die("setuid");
    }
    if (strcmp(cwd, "-") != 0 && chdir(cwd) != 0) die(cwd);
    install_seccomp();
    reset_signals();
    if (getenv("RG_NO_PROCESSES") != NULL) {
        unsetenv("RG_NO_PROCESSES");
        forbid_processes();
        /* execve is refused from here on: the test binary starts through execveat, which safe
         * Rust cannot call, so a test cannot replace itself with a fresh run of its binary. */
        syscall(SYS_execveat, AT_FDCWD, program[0], program, environ, 0);
    } else {
        execvp(program[0], program);
    }
    die(program[0]);
}

int main(int argc, char **argv) {
    keep_needed_capabilities();
    if (argc == 3 && strcmp(argv[1], "kill-uid") == 0) {
        kill_uid(atol(argv[2]));
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "seal") == 0) return seal(atol(argv[2]), argv[3], argv[4]);
    int sep = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) { sep = i; break; }
    if (sep != 11 || sep + 1 >= argc) {
        fprintf(stderr, "usage: rg-run REPORT_FD NAME UID AS_MB CPU_S NPROC FSIZE_MB NOFILE STACK_MB CWD -- ARGV...\n");
        return 125;
    }
    int report = atoi(argv[1]);
    const char *name = argv[2];
    long uid = atol(argv[3]);
    rlim_t mb = 1024 * 1024;
    rlim_t as = (rlim_t)atol(argv[4]) * mb, cpu = (rlim_t)atol(argv[5]), nproc = (rlim_t)atol(argv[6]);
    rlim_t fsize = (rlim_t)atol(argv[7]) * mb, nofile = (rlim_t)atol(argv[8]), stack = (rlim_t)atol(argv[9]) * mb;
    const char *cwd = argv[10];

    int fresh_ns = 0;
    char fresh_work[4096] = "";
    const char *fresh = getenv("RG_FRESH_NS");
    if (fresh != NULL) {
        if (fresh[0] != '/' || strlen(fresh) >= sizeof(fresh_work)) {
            dprintf(report, "fault %s RG_FRESH_NS: want the work dir\n", name);
            return 126;
        }
        fresh_ns = 1;
        strcpy(fresh_work, fresh);
        unsetenv("RG_FRESH_NS");
        /* the next child is the new pid namespace's init, in new ipc and mount namespaces too */
        if (unshare(CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNS) != 0) {
            dprintf(report, "fault %s unshare: %s\n", name, strerror(errno));
            return 126;
        }
    }

    int fault[2], relay[2];
    if (pipe2(fault, O_CLOEXEC) != 0) die("pipe2");
    if (pipe2(relay, O_CLOEXEC) != 0) die("pipe2");
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        fault_fd = fault[1]; /* >= 3, close-on-exec: gone once the program starts */
        if (fresh_ns) {
            int lo = fault[1] < relay[1] ? fault[1] : relay[1], hi = fault[1] < relay[1] ? relay[1] : fault[1];
            close_except(lo, hi);
            fresh_mounts(fresh_work);
            if (strcmp(cwd, "-") == 0 && chdir(fresh_work) != 0) die(fresh_work); /* not the old work dir */
            pid_t program = fork();
            if (program < 0) die("fork");
            if (program == 0) {
                close(relay[1]);
                start_program(uid, as, cpu, nproc, fsize, nofile, stack, cwd, &argv[sep + 1], 1);
            }
            close(fault[1]); /* EOF for the parent once the program execs (its copy is close-on-exec) */
            int program_status = 0;
            while (waitpid(program, &program_status, 0) < 0)
                if (errno != EINTR) _exit(126);
            (void)!write(relay[1], &program_status, sizeof(program_status));
            _exit(0); /* the namespace ends with its init: any thread left is killed */
        }
        close_except(fault_fd, fault_fd);
        start_program(uid, as, cpu, nproc, fsize, nofile, stack, cwd, &argv[sep + 1], 0);
    }
    close(relay[1]);
    close(fault[1]);
    char why[256];
    ssize_t got = read(fault[0], why, sizeof(why) - 1); /* EOF at the child's exec or exit */
    close(fault[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    while (wait4(child, &status, 0, &ru) < 0)
        if (errno != EINTR) die("wait4");
    int relayed = 0; /* the init's report of the program's own wait status (its rusage is in ru: it waited) */
    if (fresh_ns && read(relay[0], &relayed, sizeof(relayed)) == (ssize_t)sizeof(relayed)) status = relayed;
    close(relay[0]);
    if (uid >= 0) kill_uid(uid);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    long cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000L + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000L;
    if (got > 0) {
        why[got] = 0;
        for (char *c = why; *c; c++)
            if (*c == '\n') *c = ' ';
        dprintf(report, "fault %s %s\n", name, why);
    }
    dprintf(report, "stat %s %d %d %ld %ld\n", name, code, sig, cpu_ms, ru.ru_maxrss);
    return sig ? 128 + sig : code;
}
