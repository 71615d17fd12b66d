/// JSON text (RFC 8259) read into a ``JSONValue``.
///
/// Hand-written rather than `JSONDecoder`: it keeps `12` and `12.0` apart (``JSONValue/int(_:)``
/// and ``JSONValue/double(_:)``), which `JSONDecoder` cannot tell through `Decodable`, and it
/// serves the engine, the CLI and the local APNs stand-in alike.
extension JSONValue {
    /// Parses JSON text given as UTF-8 bytes. A name given twice in one object keeps its last
    /// value, unless `refusingDuplicateNames`: then the text is refused (readers disagree on
    /// which value counts; Foundation's `JSONDecoder` keeps the first).
    public init<Bytes: Collection>(parsing bytes: Bytes, refusingDuplicateNames: Bool = false) throws(ParseError)
    where Bytes.Element == UInt8 {
        var parser = Parser(bytes: Array(bytes), refusesDuplicateNames: refusingDuplicateNames)
        do {
            self = try parser.parseDocument()
        } catch let error as ParseError {
            throw error
        } catch {
            throw ParseError(offset: 0, message: "\(error)")
        }
    }

    /// Why a text is not JSON, with the byte offset.
    public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        public let offset: Int
        public let message: String
        public var description: String { "invalid JSON at byte \(self.offset): \(self.message)" }
    }

    private struct Parser {
        let bytes: [UInt8]
        let refusesDuplicateNames: Bool
        var index = 0
        var depth = 0

        init(bytes: [UInt8], refusesDuplicateNames: Bool) {
            self.bytes = bytes
            self.refusesDuplicateNames = refusesDuplicateNames
        }

        mutating func parseDocument() throws -> JSONValue {
            let value = try self.parseValue()
            self.skipWhitespace()
            guard self.index == self.bytes.count else { throw self.error("unexpected text after the value") }
            return value
        }

        private func error(_ message: String) -> ParseError {
            ParseError(offset: self.index, message: message)
        }

        private mutating func skipWhitespace() {
            while self.index < self.bytes.count {
                switch self.bytes[self.index] {
                case 0x20, 0x09, 0x0A, 0x0D: self.index += 1
                default: return
                }
            }
        }

        private mutating func parseValue() throws -> JSONValue {
            self.skipWhitespace()
            guard self.index < self.bytes.count else { throw self.error("unexpected end of text") }
            switch self.bytes[self.index] {
            case UInt8(ascii: "{"): return try self.parseObject()
            case UInt8(ascii: "["): return try self.parseArray()
            case UInt8(ascii: "\""): return .string(try self.parseString())
            case UInt8(ascii: "t"): try self.expectLiteral("true"); return .bool(true)
            case UInt8(ascii: "f"): try self.expectLiteral("false"); return .bool(false)
            case UInt8(ascii: "n"): try self.expectLiteral("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try self.parseNumber()
            default: throw self.error("unexpected character")
            }
        }

        private mutating func expectLiteral(_ literal: StaticString) throws {
            let count = literal.utf8CodeUnitCount
            guard self.index + count <= self.bytes.count else { throw self.error("unexpected end of text") }
            let expected = UnsafeBufferPointer(start: literal.utf8Start, count: count)
            guard self.bytes[self.index..<self.index + count].elementsEqual(expected) else {
                throw self.error("unknown literal")
            }
            self.index += count
        }

        private mutating func enter() throws {
            self.depth += 1
            guard self.depth <= 512 else { throw self.error("nested more than 512 levels deep") }
        }

        private mutating func parseObject() throws -> JSONValue {
            try self.enter()
            defer { self.depth -= 1 }
            self.index += 1
            var members: [String: JSONValue] = [:]
            self.skipWhitespace()
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "}") {
                self.index += 1
                return .object(members)
            }
            while true {
                self.skipWhitespace()
                guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "\"") else {
                    throw self.error("expected a string key")
                }
                let key = try self.parseString()
                self.skipWhitespace()
                guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ":") else {
                    throw self.error("expected ':'")
                }
                self.index += 1
                let start = self.index
                if members.updateValue(try self.parseValue(), forKey: key) != nil, self.refusesDuplicateNames {
                    self.index = start
                    throw self.error("the name \"\(key)\" is given twice in one object")
                }
                self.skipWhitespace()
                guard self.index < self.bytes.count else { throw self.error("unexpected end of text") }
                switch self.bytes[self.index] {
                case UInt8(ascii: ","): self.index += 1
                case UInt8(ascii: "}"): self.index += 1; return .object(members)
                default: throw self.error("expected ',' or '}'")
                }
            }
        }

        private mutating func parseArray() throws -> JSONValue {
            try self.enter()
            defer { self.depth -= 1 }
            self.index += 1
            var elements: [JSONValue] = []
            self.skipWhitespace()
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "]") {
                self.index += 1
                return .array(elements)
            }
            while true {
                elements.append(try self.parseValue())
                self.skipWhitespace()
                guard self.index < self.bytes.count else { throw self.error("unexpected end of text") }
                switch self.bytes[self.index] {
                case UInt8(ascii: ","): self.index += 1
                case UInt8(ascii: "]"): self.index += 1; return .array(elements)
                default: throw self.error("expected ',' or ']'")
                }
            }
        }

        private mutating func parseString() throws -> String {
            self.index += 1
            var scalars: [UInt8] = []
            while self.index < self.bytes.count {
                let byte = self.bytes[self.index]
                self.index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: scalars, as: UTF8.self) else { throw self.error("text that is not UTF-8") }
                    return text
                case UInt8(ascii: "\\"):
                    guard self.index < self.bytes.count else { throw self.error("unexpected end of text") }
                    let escape = self.bytes[self.index]
                    self.index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escape)
                    case UInt8(ascii: "b"): scalars.append(0x08)
                    case UInt8(ascii: "f"): scalars.append(0x0C)
                    case UInt8(ascii: "n"): scalars.append(0x0A)
                    case UInt8(ascii: "r"): scalars.append(0x0D)
                    case UInt8(ascii: "t"): scalars.append(0x09)
                    case UInt8(ascii: "u"):
                        var code = try self.parseHex4()
                        if (0xD800..<0xDC00).contains(code) {
                            guard self.index + 1 < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "\\"),
                                self.bytes[self.index + 1] == UInt8(ascii: "u")
                            else { throw self.error("unpaired surrogate") }
                            self.index += 2
                            let low = try self.parseHex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw self.error("unpaired surrogate") }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { throw self.error("invalid \\u escape") }
                        scalars.append(contentsOf: Array(String(Character(scalar)).utf8))
                    default:
                        throw self.error("invalid escape")
                    }
                case 0x00..<0x20:
                    throw self.error("control character in string")
                default:
                    scalars.append(byte)
                }
            }
            throw self.error("unterminated string")
        }

        private mutating func parseHex4() throws -> UInt32 {
            guard self.index + 4 <= self.bytes.count else { throw self.error("unexpected end of text") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = self.bytes[self.index]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw self.error("invalid hex digit")
                }
                value = value << 4 | digit
                self.index += 1
            }
            return value
        }

        private mutating func parseNumber() throws -> JSONValue {
            let start = self.index
            var isInteger = true
            if self.bytes[self.index] == UInt8(ascii: "-") { self.index += 1 }
            let digitsStart = self.index
            while self.index < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
                self.index += 1
            }
            guard self.index > digitsStart else { throw self.error("expected digits") }
            if self.bytes[digitsStart] == UInt8(ascii: "0"), self.index - digitsStart > 1 {
                throw self.error("leading zero")
            }
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ".") {
                isInteger = false
                self.index += 1
                let fractionStart = self.index
                while self.index < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
                    self.index += 1
                }
                guard self.index > fractionStart else { throw self.error("expected fraction digits") }
            }
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "e") || self.bytes[self.index] == UInt8(ascii: "E") {
                isInteger = false
                self.index += 1
                if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "+") || self.bytes[self.index] == UInt8(ascii: "-") {
                    self.index += 1
                }
                let exponentStart = self.index
                while self.index < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
                    self.index += 1
                }
                guard self.index > exponentStart else { throw self.error("expected exponent digits") }
            }
            let text = String(decoding: self.bytes[start..<self.index], as: UTF8.self)
            if isInteger, let value = Int64(text) {
                return .int(Int(value))
            }
            guard let value = Double(text), value.isFinite else { throw self.error("number out of range") }
            return .double(value)
        }
    }
}
