import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// The store's record of certificates and their revocation, on every store.
@Suite("CertificateRevocationTests: the store")
struct RevocationStoreTests {
    @Test(
        "Certificates: recorded per installation; a retired installation's and a deleted thing's are revoked, expired ones pruned",
        arguments: StoreFactory.all)
    func revocation(_ factory: StoreFactory) throws {
        let (s, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        func thing(_ vendor: String) throws -> ThingRecord {
            try s.registerThing(
                vendorThingID: vendor, password: "pw", thingType: "AirConditioner", firmwareVersion: nil,
                dataGroupingInterval: nil
            ).get()
        }
        let a = try thing("AC-A")
        let b = try thing("AC-B")
        let later = Platform.epochMs() + 86_400_000
        #expect(s.addInstallation(thingID: a.thingID, installationID: "i1", mqttTopic: "ta1"))
        #expect(s.addInstallation(thingID: a.thingID, installationID: "i2", mqttTopic: "ta2"))
        #expect(s.addInstallation(thingID: b.thingID, installationID: "i3", mqttTopic: "tb"))
        #expect(s.recordCertificate(thingID: a.thingID, installationID: "i1", serial: "0a01", notAfter: later))
        // The same installation onboarding again: another serial.
        #expect(s.recordCertificate(thingID: a.thingID, installationID: "i1", serial: "0a02", notAfter: later + 1))
        #expect(s.recordCertificate(thingID: a.thingID, installationID: "i2", serial: "0a03", notAfter: later))
        // Already expired: never listed.
        #expect(s.recordCertificate(thingID: a.thingID, installationID: "i2", serial: "0a04", notAfter: 1))
        #expect(s.recordCertificate(thingID: b.thingID, installationID: "i3", serial: "0b01", notAfter: later))
        #expect(!s.recordCertificate(thingID: "th.unknown", installationID: "i9", serial: "0c01", notAfter: later))
        #expect(!s.recordCertificate(thingID: b.thingID, installationID: "i3", serial: "0b01", notAfter: later))
        #expect(s.revokedCertificates(now: Platform.epochMs()) == [])

        // Retiring i1 revokes its two certificates only.
        let t0 = Platform.epochMs()
        #expect(s.removeInstallation(thingID: a.thingID, installationID: "i1"))
        let afterRetire = try #require(s.revokedCertificates(now: Platform.epochMs()))
        #expect(afterRetire.map(\.serial) == ["0a01", "0a02"])
        #expect(afterRetire.map(\.notAfter) == [later, later + 1])
        #expect(afterRetire.allSatisfy { $0.revokedAt >= t0 && $0.revokedAt <= Platform.epochMs() })

        // Deleting A revokes the rest of its certificates (not the expired one), not B's.
        #expect(s.deleteThing(id: a.thingID))
        #expect(try #require(s.revokedCertificates(now: Platform.epochMs())).map(\.serial) == ["0a01", "0a02", "0a03"])
        // Past their notAfter, revoked entries are pruned; B's record too.
        #expect(try #require(s.revokedCertificates(now: later)).map(\.serial) == ["0a02"])
        #expect(try #require(s.revokedCertificates(now: later + 1)) == [])
        #expect(s.deleteThing(id: b.thingID))
        #expect(s.revokedCertificates(now: Platform.epochMs()) == [])
    }
}
