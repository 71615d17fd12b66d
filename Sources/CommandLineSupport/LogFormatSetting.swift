import ConsoleOutput

/// `--log-format text|json` (any command, anywhere before `--`; the last one wins) or else
/// `ORDERFLOW_LOG_FORMAT`, else `text`. Read before the arguments are parsed, because the
/// handler is installed before any command runs; the option is then taken out of the
/// arguments, so that no command needs to declare it.
public enum LogFormatSetting {
    public static let option = "--log-format"
    public static let variable = "ORDERFLOW_LOG_FORMAT"

    public static func choose(arguments: [String], environment: [String: String]) throws -> (format: LogFormat, remaining: [String]) {
        var remaining: [String] = []
        var given: String?
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" {
                remaining += arguments[index...]
                break
            }
            if argument == option {
                guard index + 1 < arguments.count, !arguments[index + 1].hasPrefix("-") else {
                    throw CLIError(.usage, "\(option) needs a value: \(LogFormat.choices)")
                }
                given = arguments[index + 1]
                index += 2
                continue
            }
            if argument.hasPrefix(option + "=") {
                given = String(argument.dropFirst(option.count + 1))
                index += 1
                continue
            }
            remaining.append(argument)
            index += 1
        }
        if let given {
            return (try format(given, named: option), remaining)
        }
        if let value = environment[variable], !value.isEmpty {
            return (try format(value, named: variable), remaining)
        }
        return (.text, remaining)
    }

    private static func format(_ value: String, named name: String) throws -> LogFormat {
        guard let format = LogFormat(setting: value) else {
            throw CLIError(.usage, "\(name) must be \(LogFormat.choices), not '\(Formatting.escaped(value))'",
                           remedy: "json writes one JSON object per line on stderr, for log shippers; text is for people")
        }
        return format
    }
}
