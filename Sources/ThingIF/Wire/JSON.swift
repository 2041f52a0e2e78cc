// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// An owned reference to a jansson value. Dropping it decrefs the value.
/// jansson's macros (json_is_object, json_object_foreach) are not visible to
/// Swift, so the few reads the wire format needs live here.
public final class JSON {
    public let raw: UnsafeMutablePointer<json_t>

    /// Takes over a new reference (e.g. from json_object()).
    public init(owning raw: UnsafeMutablePointer<json_t>) { self.raw = raw }

    /// Adds a reference to a borrowed value.
    public init(borrowing raw: UnsafeMutablePointer<json_t>) {
        self.raw = raw
        _ = json_incref(raw)
    }

    deinit { json_decref(raw) }

    public struct ParseError: Error, CustomStringConvertible {
        public let text: String
        public let line: Int
        public let column: Int
        public var description: String { str("\(text) (line \(line), column \(column))") }
    }

    /// Parses a byte buffer (not NUL-terminated). Duplicate keys are refused;
    /// jansson refuses invalid UTF-8 and nesting deeper than 2048.
    public static func parse(_ bytes: [UInt8]) -> Result<JSON, ParseError> {
        var error = json_error_t()
        let value = bytes.withUnsafeBufferPointer { buf -> UnsafeMutablePointer<json_t>? in
            // A NULL base (empty buffer) is fine for jansson with length 0, but
            // pass a valid pointer anyway.
            let base = UnsafeRawPointer(buf.baseAddress) ?? UnsafeRawPointer(bitPattern: 1)!
            return json_loadb(
                base.assumingMemoryBound(to: CChar.self), buf.count,
                Int(JSON_REJECT_DUPLICATES), &error)
        }
        if let value { return .success(JSON(owning: value)) }
        let text = withUnsafeBytes(of: &error.text) { raw -> String in
            let chars = raw.bindMemory(to: CChar.self)
            return String(cString: chars.baseAddress!)
        }
        return .failure(ParseError(text: text, line: Int(error.line), column: Int(error.column)))
    }

    public static func parse(_ text: String) -> Result<JSON, ParseError> { parse(Array(text.utf8)) }

    // MARK: builders

    public static func object() -> JSON { JSON(owning: json_object()) }
    public static func array() -> JSON { JSON(owning: json_array()) }
    public static func bool(_ v: Bool) -> JSON { JSON(owning: v ? json_true() : json_false()) }
    public static func null() -> JSON { JSON(owning: json_null()) }
    public static func int(_ v: Int) -> JSON { JSON(owning: json_integer(json_int_t(v))) }
    /// A 64-bit integer (epoch milliseconds): `Int` is 32 bits on armv7.
    public static func int64(_ v: Int64) -> JSON { JSON(owning: json_integer(json_int_t(v))) }
    /// nil when `s` is not valid UTF-8 (it always is for a Swift String,
    /// unless it holds a NUL, which jansson refuses in json_string).
    public static func string(_ s: String) -> JSON? {
        var s = s
        let v = s.withUTF8 { buf in
            json_stringn(
                UnsafeRawPointer(buf.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                    .assumingMemoryBound(to: CChar.self), buf.count)
        }
        return v.map { JSON(owning: $0) }
    }

    // MARK: reading

    public var type: json_type { raw.pointee.type }
    public var isObject: Bool { type == JSON_OBJECT }
    public var isArray: Bool { type == JSON_ARRAY }
    public var isString: Bool { type == JSON_STRING }
    public var isNull: Bool { type == JSON_NULL }

    public var typeName: String { JSON.typeName(raw) }

    public static func typeName(_ raw: UnsafeMutablePointer<json_t>) -> String {
        switch raw.pointee.type {
        case JSON_OBJECT: return "an object"
        case JSON_ARRAY: return "an array"
        case JSON_STRING: return "a string"
        case JSON_INTEGER: return "an integer"
        case JSON_REAL: return "a number"
        case JSON_TRUE, JSON_FALSE: return "a boolean"
        default: return "null"
        }
    }

    /// The string value, or nil when not a string. jansson strings are valid
    /// UTF-8; a string holding NUL is cut at the NUL only if built that way.
    public var stringValue: String? {
        guard isString, let c = json_string_value(raw) else { return nil }
        let len = json_string_length(raw)
        return String(decoding: UnsafeRawBufferPointer(start: c, count: len), as: UTF8.self)
    }

    /// The integer value, or nil when not an integer or when it does not
    /// fit `Int` (32 bits on armv7: epoch milliseconds do not; read them
    /// with int64Value).
    public var intValue: Int? {
        switch type {
        case JSON_INTEGER: return Int(exactly: json_integer_value(raw))
        default: return nil
        }
    }

    /// The integer value as 64 bits (jansson's json_int_t is long long).
    public var int64Value: Int64? {
        switch type {
        case JSON_INTEGER: return Int64(json_integer_value(raw))
        default: return nil
        }
    }

    public var boolValue: Bool? {
        switch type {
        case JSON_TRUE: return true
        case JSON_FALSE: return false
        default: return nil
        }
    }

    public subscript(key: String) -> JSON? {
        guard isObject, let v = key.withCString({ json_object_get(raw, $0) }) else { return nil }
        return JSON(borrowing: v)
    }

    /// Object members in document order.
    public var members: [(key: String, value: JSON)] {
        guard isObject else { return [] }
        var out: [(key: String, value: JSON)] = []
        var it = json_object_iter(raw)
        while let i = it {
            let key = String(cString: json_object_iter_key(i))
            if let v = json_object_iter_value(i) { out.append((key, JSON(borrowing: v))) }
            it = json_object_iter_next(raw, i)
        }
        return out
    }

    public var count: Int {
        switch type {
        case JSON_OBJECT: return json_object_size(raw)
        case JSON_ARRAY: return json_array_size(raw)
        default: return 0
        }
    }

    public var elements: [JSON] {
        guard isArray else { return [] }
        return (0..<json_array_size(raw)).compactMap { i in
            json_array_get(raw, i).map { JSON(borrowing: $0) }
        }
    }

    // MARK: writing

    public func set(_ key: String, _ value: JSON) {
        _ = key.withCString { json_object_set(raw, $0, value.raw) }
    }

    public func set(_ key: String, string: String) {
        if let s = JSON.string(string) { set(key, s) }
    }

    public func append(_ value: JSON) { json_array_append(raw, value.raw) }

    /// Compact text with every non-ASCII character escaped, so the payload
    /// is plain ASCII whatever the strings hold.
    public func dump() -> String {
        let flags = Int(JSON_COMPACT) | Int(JSON_ENSURE_ASCII) | Int(JSON_ENCODE_ANY)
        guard let c = json_dumps(raw, flags) else { return "null" }
        defer { JSON.freeDumped(c) }
        return String(cString: c)
    }

    /// Frees what json_dumps returned with jansson's own free function: a
    /// host may have given jansson its allocator (json_set_alloc_funcs), and
    /// libc's free() on that memory corrupts the heap (found by fuzzing).
    static func freeDumped(_ c: UnsafeMutablePointer<CChar>) {
        var allocate: json_malloc_t?
        var release: json_free_t?
        json_get_alloc_funcs(&allocate, &release)
        if let release { release(c) } else { free(c) }
    }

    /// `dump()` as bytes, copied once from jansson's buffer.
    public func dumpBytes() -> [UInt8] {
        let flags = Int(JSON_COMPACT) | Int(JSON_ENSURE_ASCII) | Int(JSON_ENCODE_ANY)
        guard let c = json_dumps(raw, flags) else { return Array("null".utf8) }
        defer { JSON.freeDumped(c) }
        return UnsafeRawBufferPointer(start: c, count: strlen(c)).map { $0 }
    }

    /// `s` as a JSON string literal, written as `dump()` writes strings
    /// (quotes, control characters and every non-ASCII character escaped,
    /// `\uXXXX` with surrogate pairs past U+FFFF), without building a
    /// jansson value: the encoders on the per-command path use it.
    public static func quoted(_ s: String) -> [UInt8] {
        var s = s
        return s.withUTF8 { u in
            var out: [UInt8] = []
            out.reserveCapacity(u.count + 2)
            out.append(0x22)
            func escape(_ v: UInt32) {
                out.append(0x5C)
                out.append(0x75)
                var shift: UInt32 = 12
                while true {
                    let d = UInt8(v >> shift & 15)
                    out.append(d < 10 ? 0x30 + d : 0x37 + d)
                    if shift == 0 { break }
                    shift -= 4
                }
            }
            // Runs of bytes that need no escape are copied whole.
            var plain = 0
            var i = 0
            while i < u.count {
                let b = u[i]
                if b >= 0x20 && b < 0x80 && b != 0x22 && b != 0x5C {
                    i += 1
                    continue
                }
                if plain < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: u[plain..<i])) }
                switch b {
                case 0x22, 0x5C: out += [0x5C, b]
                case 0x0A: out += [0x5C, 0x6E]
                case 0x0D: out += [0x5C, 0x72]
                case 0x09: out += [0x5C, 0x74]
                case 0x08: out += [0x5C, 0x62]
                case 0x0C: out += [0x5C, 0x66]
                case 0..<0x20: escape(UInt32(b))
                default:
                    // A scalar of 2-4 bytes (a String is valid UTF-8).
                    let n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2
                    var v = UInt32(b) & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07)
                    for k in 1..<n where i + k < u.count { v = v << 6 | UInt32(u[i + k] & 0x3F) }
                    if v > 0xFFFF {
                        escape(0xD800 + ((v - 0x10000) >> 10))
                        escape(0xDC00 + ((v - 0x10000) & 0x3FF))
                    } else {
                        escape(v)
                    }
                    i += n - 1
                }
                i += 1
                plain = i
            }
            if plain < u.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: u[plain..<u.count])) }
            out.append(0x22)
            return out
        }
    }

    /// A deep copy, for values that must outlive the message they came in.
    public func deepCopy() -> JSON? { json_deep_copy(raw).map { JSON(owning: $0) } }
}
