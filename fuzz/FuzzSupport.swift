// SPDX-License-Identifier: Apache-2.0

// Shared by every fuzz target (compiled into each; not part of the library).
// A property failure is a crash: fuzzFail prints what broke and aborts, so
// libFuzzer saves the input as crash-<sha1>.
import CThingIF

@inline(never)
func fuzzFail(_ what: String, _ input: [UInt8]) -> Never {
    let text = String(decoding: input.prefix(512), as: UTF8.self)
    fputs("PROPERTY FAILED: \(what)\ninput (\(input.count) bytes, first 512 as text): \(text)\n", stderr)
    abort()
}

/// libFuzzer's entry point, the same for every target: the target's
/// fuzzCheck(_:) (defined once in fuzz/<target>.swift) runs on the input, and
/// jansson's memory must be back at its baseline afterwards.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzBytes(data, size)
    fuzzBalanced(input) { fuzzCheck(input) }
    return 0
}

/// The input as a Swift array (the parsers take [UInt8]).
@inline(__always)
func fuzzBytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// jansson's allocations outstanding: a counting allocator is installed
/// once, so every target can check that a parse and its values give back
/// all the memory jansson took ("memory returns to its baseline").
nonisolated(unsafe) var janssonLive = 0

private func countingMalloc(_ n: Int) -> UnsafeMutableRawPointer? {
    guard let p = malloc(n + 16) else { return nil }
    p.storeBytes(of: n, as: Int.self)
    janssonLive += 1
    return p + 16
}

private func countingFree(_ p: UnsafeMutableRawPointer?) {
    guard let p else { return }
    janssonLive -= 1
    free(p - 16)
}

nonisolated(unsafe) private var installed = false

func fuzzSetUp() {
    if installed { return }
    installed = true
    json_set_alloc_funcs({ countingMalloc($0) }, { countingFree($0) })
}

/// Runs `body` and checks that jansson's allocation count is back where it
/// was: every JSON value the parsers made was released.
@inline(__always)
func fuzzBalanced(_ input: [UInt8], _ body: () -> Void) {
    fuzzSetUp()
    let before = janssonLive
    body()
    if janssonLive != before {
        fuzzFail("jansson memory not back to its baseline: \(janssonLive - before) allocation(s) outstanding", input)
    }
}
