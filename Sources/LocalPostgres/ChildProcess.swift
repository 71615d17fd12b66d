import Foundation

/// Runs a program to completion with `posix_spawn` and `waitpid`, on a thread of its own.
///
/// Hand-written because Foundation's `Process` on Linux learns that a child exited through a
/// descriptor the child inherits; `pg_ctl start` leaves the server holding it, so
/// `waitUntilExit()` never returns. And a wait of seconds must not occupy the concurrency pool.
public enum ChildProcess {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs `arguments[0]` with `arguments`, stdin from /dev/null, stdout and stderr into
    /// `outputPath`; returns the exit status. `started` gets the child's process id once it runs
    /// (to signal it or read its `/proc` entry meanwhile).
    public static func run(
        _ arguments: [String], environment: [String: String], outputPath: String,
        started: @escaping @Sendable (pid_t) -> Void = { _ in }
    ) async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result {
                    try runBlocking(arguments, environment: environment, outputPath: outputPath, started: started)
                })
            }
            thread.name = "orderflow child process"
            thread.start()
        }
    }

    private static func runBlocking(
        _ arguments: [String], environment: [String: String], outputPath: String, started: (pid_t) -> Void
    ) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else this process holds reaches the child. Descriptors it inherited without
        // close-on-exec (a shell's pipe for `$(orderflow db url)`, the socket through which a
        // parent's Foundation `Process` learns that this one exited) would stay open in the
        // server `pg_ctl start` leaves running, and whoever waits for their end would wait as
        // long as the server runs. glibc ignores a close of a descriptor that is not open.
        for descriptor in openDescriptors() where descriptor > 2 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }

        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // Threads of a Swift process may block signals; a child must not inherit that mask
        // (pgbench's -T relies on SIGALRM, the server on SIGTERM/SIGINT).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard spawned == 0 else {
            throw Failure(description: "cannot run \(arguments[0]): \(String(cString: strerror(spawned)))")
        }
        started(pid)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw Failure(description: "lost track of \(arguments[0]) (waitpid failed)") }
        }
        // WIFEXITED / WEXITSTATUS, which Swift does not import as macros.
        if status & 0x7F == 0 { return (status >> 8) & 0xFF }
        return 128 + (status & 0x7F)
    }

    /// This process's open descriptors (`posix_spawn_file_actions_addclosefrom_np` would do,
    /// but Swift's Glibc module does not import it).
    private static func openDescriptors() -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap { Int32($0) }
    }
}
