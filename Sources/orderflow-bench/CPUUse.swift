import Foundation

/// The machine's CPU time and this process's, read from `/proc` (Linux), to split a turn's CPU
/// per transition between the benchmark's own process and everything else (PostgreSQL, pgbench),
/// and to see how much of the cores stayed idle.
struct CPUUse {
    /// Busy and idle time of all cores, and this process's user + system time, in clock ticks.
    var busy: Double
    var idle: Double
    var ownProcess: Double
    /// The user + system time of another process the benchmark started (`orderflow serve`), in
    /// clock ticks; 0 when none is watched.
    var otherProcess: Double = 0
    /// When it was read.
    var taken: ContinuousClock.Instant

    /// Nil where `/proc` is not there to read; `watching` is another process's id (its time
    /// reads 0 once it is gone).
    static func now(watching other: Int32? = nil) -> CPUUse? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = stat.split(separator: "\n").first, line.hasPrefix("cpu "),
              let own = processTicks("/proc/self/stat")
        else { return nil }
        // user nice system idle iowait irq softirq (guest time is inside user already; steal,
        // time another virtual machine had, is neither this machine's work nor its idleness)
        let ticks = line.split(separator: " ").dropFirst().prefix(7).compactMap { Double($0) }
        guard ticks.count == 7 else { return nil }
        let idle = ticks[3] + ticks[4]
        return CPUUse(busy: ticks.reduce(0, +) - idle, idle: idle, ownProcess: own,
                      otherProcess: other.flatMap { processTicks("/proc/\($0)/stat") } ?? 0, taken: .now)
    }

    /// A process's user + system time in clock ticks, from its `stat` file.
    private static func processTicks(_ path: String) -> Double? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let afterName = text.range(of: ") ", options: .backwards)
        else { return nil }
        // Fields after the command name start at the third (state); utime and stime are the 14th and 15th.
        let fields = text[afterName.upperBound...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return user + system
    }

    /// Seconds from `start` to this reading.
    func seconds(since start: CPUUse) -> Double {
        let elapsed = taken - start.taken
        return elapsed.asSeconds
    }

    /// This process's, the watched process's and the rest of the machine's CPU time per
    /// transition, in µs, from `start` to self at `rate` transitions per second.
    func microsecondsPerTransition(since start: CPUUse, rate: Double) -> (own: Double, other: Double, rest: Double) {
        let perTick = 1e6 / Double(sysconf(Int32(_SC_CLK_TCK)))
        let count = max(1, rate * seconds(since: start))
        let own = ownProcess - start.ownProcess, other = otherProcess - start.otherProcess
        return (own * perTick / count, other * perTick / count, ((busy - start.busy) - own - other) * perTick / count)
    }

    /// "this process N µs, everything else M µs per transition; cores idle P %" for the
    /// stretch from `start` to self, at `rate` transitions per second. Everything else is the
    /// whole machine's: only meaningful on a machine with nothing else running.
    func summary(since start: CPUUse, rate: Double, otherName: String = "the server") -> String {
        let (own, other, rest) = microsecondsPerTransition(since: start, rate: rate)
        let idleShare = (idle - start.idle) / max(1, (busy - start.busy) + (idle - start.idle))
        let server = otherProcess > 0 ? ", \(otherName)" + String(format: " %.0f µs", other) : ""
        return String(format: "CPU per transition: this process %.0f µs%@, everything else %.0f µs; cores idle %.0f %%",
                      own, server, rest, idleShare * 100)
    }
}
