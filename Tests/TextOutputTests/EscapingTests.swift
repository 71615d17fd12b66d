import ConsoleOutput
import Foundation
import Logging
import Testing

/// `Formatting.escaped`: what a terminal would act on becomes `\u{…}` text, nothing else changes.
@Suite("Escaping text for people")
struct EscapingTests {
    @Test("controls, line breaks and direction controls are written as \\u{…}; other text is unchanged", arguments: [
        ("plain 1042 iphone-anna", "plain 1042 iphone-anna"),
        ("\u{1B}[31mred\u{1B}[0m", "\\u{1B}[31mred\\u{1B}[0m"),
        ("a\u{0}b\u{1}c\u{7}d\u{8}", "a\\u{0}b\\u{1}c\\u{7}d\\u{8}"),
        ("two\nlines\r\ttab", "two\\u{A}lines\\u{D}\\u{9}tab"),
        ("del\u{7F} csi\u{9B}31m nel\u{85}", "del\\u{7F} csi\\u{9B}31m nel\\u{85}"),
        ("abc\u{202E}fdp.exe", "abc\\u{202E}fdp.exe"),
        ("\u{2067}שלום\u{2069} \u{202B}x\u{202C}", "\\u{2067}שלום\\u{2069} \\u{202B}x\\u{202C}"),
        ("lrm\u{200E} rlm\u{200F} alm\u{61C}", "lrm\\u{200E} rlm\\u{200F} alm\\u{61C}"),
        ("line\u{2028}para\u{2029}", "line\\u{2028}para\\u{2029}"),
        ("🍕👨‍👩‍👧‍👦🇮🇹 Zoë e\u{301} zero\u{200B}width", "🍕👨‍👩‍👧‍👦🇮🇹 Zoë e\u{301} zero\u{200B}width"),
        (#"back\slash \u{1B} stays"#, #"back\slash \u{1B} stays"#),
        ("", ""),
    ])
    func escaped(input: String, expected: String) {
        #expect(Formatting.escaped(input) == expected)
    }

    @Test("no code point a terminal acts on survives escaping")
    func everyControlIsEscaped() {
        var all = ""
        for value in Array(0..<0x20) + [0x7F] + Array(0x80..<0xA0) + [0x61C, 0x200E, 0x200F, 0x2028, 0x2029]
            + Array(0x202A...0x202E) + Array(0x2066...0x2069)
        {
            all.unicodeScalars.append(Unicode.Scalar(UInt32(value))!)
        }
        let shown = Formatting.escaped(all)
        #expect(shown.unicodeScalars.allSatisfy { $0.isASCII && (0x20..<0x7F).contains($0.value) }, "\(shown.debugDescription)")
        #expect(shown.unicodeScalars.count > all.unicodeScalars.count * 5)
    }

    @Test("escaped before styling: the only escape sequences are the style's own")
    func escapedThenStyled() {
        let terminal = Terminal(isInteractive: true, usesColor: true)
        let styled = terminal.styled(Formatting.escaped("x\u{1B}[2Jy"), .bold)
        #expect(styled == "\u{1B}[1mx\\u{1B}[2Jy\u{1B}[0m")
        #expect(visibleWidth(styled) == "x\\u{1B}[2Jy".count)
    }

    @Test("a table of escaped cells stays aligned, one line per row")
    func tableOfEscapedCells() {
        var table = TextTable(header: ["ORDER", "DEVICE"])
        table.append([Formatting.escaped("a\nb"), "phone"])
        table.append(["1042", Formatting.escaped("\u{202E}x")])
        let lines = table.render(Terminal(isInteractive: false, usesColor: false))
        #expect(lines == ["ORDER    DEVICE", "a\\u{A}b  phone", "1042     \\u{202E}x"])
    }

    @Test("a word of a command is quoted for a shell, then escaped")
    func commandWords() {
        #expect(Formatting.commandWord("1042") == "1042")
        #expect(Formatting.commandWord("#1042") == "'#1042'")
        #expect(Formatting.commandWord("a b'c") == #"'a b'\''c'"#)
        #expect(Formatting.commandWord("a\u{1B}b") == "'a\\u{1B}b'")
    }
}

/// The process's log lines: every message and metadata value escaped when the line is written,
/// whether the value was set on the logger beforehand or given with the line.
@Suite("Escaping log lines")
struct EscapingLogHandlerTests {
    /// Collects what the handler writes.
    final class Lines: TextOutputStream, @unchecked Sendable {
        private let lock = NSLock()
        private var text = ""
        func write(_ string: String) { lock.withLock { text += string } }
        var written: String { lock.withLock { text } }
    }

    @Test("hostile text set on the logger, given with the line or in the message reaches the stream escaped")
    func escapedWhenWritten() {
        let lines = Lines()
        var logger = Logger(label: "test") { label in EscapingLogHandler(label: label, level: .info, stream: lines) }
        logger[metadataKey: "apns.channel"] = "ab\u{202E}cd"
        logger[metadataKey: "shared"] = "from the logger"
        logger.info("moved \u{1B}[31m", metadata: ["order": "x\u{7}y", "shared": "from the line", "list": ["p\u{2028}q"]])
        logger.debug("below the level")
        let written = lines.written
        #expect(written.contains("apns.channel=ab\\u{202E}cd") && written.contains("order=x\\u{7}y"), "\(written)")
        #expect(written.contains("moved \\u{1B}[31m") && written.contains("list=[") && written.contains("u{2028}q"), "\(written)")
        #expect(written.contains("shared=from the line") && !written.contains("from the logger"), "the line's value wins: \(written)")
        #expect(!written.contains("below the level"))
        #expect(!written.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || $0.properties.isBidiControl || $0.value == 0x2028 },
                "\(written.debugDescription)")
        #expect(logger[metadataKey: "apns.channel"] == "ab\u{202E}cd", "kept as set; escaped only in lines")
    }

    struct Refusal: Error, CustomStringConvertible {
        var description: String { "refused \u{1B}]0;title\u{7}" }
    }

    @Test("the provider's values rank between the logger's and the line's; they and an error's text are escaped too")
    func providerAndError() {
        let lines = Lines()
        let provider = Logger.MetadataProvider { ["provided": "p\u{202E}q", "shared": "from the provider", "mine": "from the provider"] }
        var logger = Logger(label: "test") { label in
            EscapingLogHandler(label: label, level: .info, stream: lines, metadataProvider: provider)
        }
        logger[metadataKey: "shared"] = "from the logger"
        logger.log(level: .warning, "failed", error: Refusal(), metadata: ["mine": "from the line"])
        let written = lines.written
        #expect(written.contains("provided=p\\u{202E}q") && written.contains("shared=from the provider")
                && written.contains("mine=from the line"), "\(written)")
        #expect(written.contains("error.message=refused \\u{1B}]0;title\\u{7}"), "\(written)")
        #expect(!written.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n") || $0.properties.isBidiControl }, "\(written.debugDescription)")
    }
}
