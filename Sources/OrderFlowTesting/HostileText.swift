import Foundation
import PGKit

/// Text that a terminal would act on, stored as old data might hold it (written before the
/// engine's text policy, or by hand), and the check that output shows it as text only.
public enum HostileText {
    /// Terminal escapes (clear the screen, a colour, an OSC window title ended by BEL).
    public static let escapes = "esc\u{1B}[2J\u{1B}[31mred\u{1B}]0;pwned\u{7}"
    /// C0 and C1 controls: SOH, backspace, DEL and CSI (`U+009B`, ESC `[` in one code point).
    public static let controls = "ctl\u{1}\u{8}\u{7F}\u{9B}31m"
    /// A right-to-left override that is never closed: what follows it reads backwards.
    public static let override = "abc\u{202E}fdp.exe"
    /// Line breaks, a carriage return, a tab and a line separator inside one value.
    public static let lineBreaks = "two\nlines\rback\ttab\u{2028}sep"

    /// Short enough for a `string(12)` attribute (an order number), which rendering checks.
    public static let shortEscape = "\u{1B}[2J#42"

    /// An order id outside the policy, sorting before `1042` in any collation.
    public static let orderID = "0\u{1B}[2J\u{202E}order"

    /// What in `output` a terminal would act on or reorder: any code point below U+0020 but
    /// the newline, DEL, C1 controls, line and paragraph separators, and direction controls.
    /// Empty when the output is inert. (UTF-8 puts no byte below 0x80 inside a multi-byte
    /// character, so this is also every byte below 0x20 but the newline.)
    public static func terminalControls(in output: String) -> [String] {
        var found: [String] = []
        for scalar in output.unicodeScalars {
            let value = scalar.value
            let acts = (value < 0x20 && value != 0x0A) || value == 0x7F || (0x80..<0xA0).contains(value)
                || value == 0x2028 || value == 0x2029 || scalar.properties.isBidiControl
            let name = String(format: "U+%04X", value)
            if acts, !found.contains(name) { found.append(name) }
        }
        return found
    }

    /// `output` without the colour sequences a terminal style adds (`ESC [ 1;32 m`).
    public static func withoutStyles(_ output: String) -> String {
        output.replacingOccurrences(of: "\u{1B}\\[[0-9;]*m", with: "", options: .regularExpression)
    }

    /// Writes the hostile values into the stored rows of `orderID` (which exists and has at
    /// least one transition) of `merchantID`, directly: its order number and content, the actor and
    /// event of its transitions, an activity and two deliveries. Then copies the order under
    /// ``orderID``. Returns the device id written.
    @discardableResult
    public static func inject(into database: PostgresConfiguration, merchantID: String, orderID: String) async throws -> String {
        let device = "phone" + escapes
        try await PostgresConnection.withConnection(database) { connection in
            try await connection.query(PostgresQuery("""
                UPDATE orders
                SET attributes = attributes || jsonb_build_object('orderNumber', $3::text),
                    content = content || jsonb_build_object('message', $4::text, 'driverName', $5::text)
                WHERE merchant_id = $1 AND order_id = $2
                """, merchantID, orderID, shortEscape, controls, lineBreaks))
            // The history is append-only (a trigger refuses updates): old data is written past it.
            try await connection.query(PostgresQuery("ALTER TABLE order_transitions DISABLE TRIGGER order_transitions_append_only"))
            try await connection.query(PostgresQuery("""
                UPDATE order_transitions
                SET actor = $3, event = CASE WHEN seq > 1 THEN $4 ELSE event END
                WHERE merchant_id = $1 AND order_id = $2
                """, merchantID, orderID, controls, override))
            try await connection.query(PostgresQuery("ALTER TABLE order_transitions ENABLE TRIGGER order_transitions_append_only"))
            try await connection.query(PostgresQuery("""
                INSERT INTO activities (merchant_id, order_id, device_id, status, update_token, last_seq)
                VALUES ($1, $2, $3, 'active', $4, 1)
                """, merchantID, orderID, device, "00ff00ff" + override))
            try await connection.query(PostgresQuery("""
                INSERT INTO deliveries (merchant_id, order_id, device_id, seq, merged, event, token_kind, token_suffix,
                                        priority, alert_title, status, reason, outcome)
                VALUES ($1, $2, $3, 1, 1, $4, 'activity', $5, 10, $6, 200, NULL, 'sent'),
                       ($1, $2, $3, 1, 1, 'update', $7, 'cafef00d', 10, $8, 410, $9, 'dead')
                """, merchantID, orderID, device, override, controls, escapes, lineBreaks, override, escapes))
            try await connection.query(PostgresQuery("""
                INSERT INTO orders
                SELECT (jsonb_populate_record(o, jsonb_build_object('order_id', $3::text))).*
                FROM orders o WHERE merchant_id = $1 AND order_id = $2
                """, merchantID, orderID, Self.orderID))
        }
        return device
    }
}
