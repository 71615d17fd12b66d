import APNSCore
import Foundation
import Testing

@Suite("JSONValue")
struct JSONValueTests {
    let sample: JSONValue = [
        "b": true, "a": [1, 2.5, "x", nil], "c": ["z": "\"quoted\"\n\u{01}", "y": -3], "d": 1e20,
    ]

    @Test func deterministicSortedEncoding() {
        #expect(sample.jsonString == #"{"a":[1,2.5,"x",null],"b":true,"c":{"y":-3,"z":"\"quoted\"\n\u0001"},"d":1e+20}"#)
        #expect(JSONValue.double(3).jsonString == "3.0")
        #expect(JSONValue.double(.nan).jsonString == "null")
    }

    @Test func escapesEveryControlByteAndCountsWhatItWrites() throws {
        let hostile = "Tab\tq\" b\\s \n\r\u{8}\u{c}\u{1}\u{1f} ünï 🍕 \u{7f}\u{202E}"
        let value: JSONValue = ["k\"ey": .string(hostile), "plain": "text"]
        #expect(value.jsonString == #"{"k\"ey":"Tab\tq\" b\\s \n\r\b\f\u0001\u001f ünï 🍕 \#u{7f}\#u{202E}","plain":"text"}"#)
        #expect(value.jsonByteCount == value.serialized.count)
        #expect(value.jsonString.utf8.elementsEqual(value.serialized))
        #expect(try JSONValue(json: value.jsonString) == value)
    }

    @Test func roundTripsThroughCodable() throws {
        let data = try JSONEncoder().encode(sample)
        #expect(try JSONDecoder().decode(JSONValue.self, from: data) == sample)
        #expect(try JSONValue(json: sample.jsonString) == sample)
        #expect(try JSONValue(json: "1") == .int(1))
        #expect(try JSONValue(json: "1.5") == .double(1.5))
        #expect(try JSONValue(json: "false") == .bool(false))
    }

    @Test("under JSONDecoder every value decodes as its own kind: a string that reads as a number or a bool stays a string")
    func decodesEachKindAsItIs() throws {
        let text = #"{"s12":"12","n12":12,"f":12.5,"e":1e2,"t":true,"st":"true","z":null,"l":[1,"x",[],{},false],"o":{"k":{"j":-1}},"big":18446744073709551616}"#
        let decoded = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(decoded == [
            "s12": "12", "n12": 12, "f": 12.5, "e": 100, "t": true, "st": "true", "z": nil,
            "l": [1, "x", [], [:], false], "o": ["k": ["j": -1]], "big": 18446744073709551616.0,
        ])
        #expect(try JSONDecoder().decode([JSONValue].self, from: Data(#"["a",2,null]"#.utf8)) == ["a", 2, nil])
        // And back: the encoder writes what the parser reads, kinds kept.
        let encoded = try JSONEncoder().encode(decoded)
        #expect(try JSONValue(data: encoded) == decoded)
    }

    @Test("a name given twice keeps its last value, or is refused when asked")
    func duplicateNames() throws {
        #expect(try JSONValue(parsing: Array(#"{"a":1,"a":2}"#.utf8)) == ["a": 2])
        for text in [#"{"a":1,"a":2}"#, #"{"x":[{"b":true,"b":true}]}"#] {
            #expect(throws: JSONValue.ParseError.self) { try JSONValue(parsing: Array(text.utf8), refusingDuplicateNames: true) }
        }
        #expect(try JSONValue(parsing: Array(#"{"a":{"a":1},"b":[{"a":2},{"a":3}]}"#.utf8), refusingDuplicateNames: true)
                == ["a": ["a": 1], "b": [["a": 2], ["a": 3]]])
    }

    @Test func convertsFoundationJSON() throws {
        let object = try JSONSerialization.jsonObject(with: Data(#"{"t":true,"f":false,"one":1,"zero":0,"pi":3.14,"s":"x","n":null,"l":[1,"a"]}"#.utf8))
        #expect(try JSONValue(foundation: object) == [
            "t": true, "f": false, "one": 1, "zero": 0, "pi": 3.14, "s": "x", "n": nil, "l": [1, "a"],
        ])
        #expect(try JSONValue(foundation: ["k": 2, "b": true] as [String: Any]) == ["k": 2, "b": true])
        #expect(throws: JSONValue.ConversionError.self) { try JSONValue(foundation: Date()) }
    }

    @Test func accessors() {
        #expect(sample["a"]?[1]?.doubleValue == 2.5)
        #expect(sample["a"]?[0]?.intValue == 1)
        #expect(sample["a"]?[3]?.isNull == true)
        #expect(sample["a"]?[9] == nil)
        #expect(sample["c"]?["y"] == -3)
        #expect(sample["b"]?.boolValue == true)
        #expect(sample["missing"] == nil)
        #expect(JSONValue.double(4).intValue == 4)
        #expect(JSONValue.double(4.5).intValue == nil)
    }
}
