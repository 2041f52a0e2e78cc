// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The certificates the things' CA signed, and their revocation. One part of HubStore (its conventions hold: times in milliseconds since the
/// Unix epoch, JSON as compact text, every method safe to call from any
/// thread).
public protocol CertificateStore: AnyObject, Sendable {
    /// Records a certificate the things' CA signed for one of the thing's
    /// MQTT installations (serial: its DER bytes as lowercase hex;
    /// notAfter: epoch ms), so that deleting the thing or retiring the
    /// installation revokes it. Every certificate is recorded: a thing that
    /// onboards again (same topic, a new certificate) adds a serial. False
    /// when the thing is unknown or the store cannot write: the caller then
    /// hands the certificate out to nobody.
    func recordCertificate(thingID: String, installationID: String, serial: String, notAfter: Int64) -> Bool
    /// The revoked certificates that have not expired at `now`, by serial;
    /// expired ones (revoked or still recorded) are deleted first, so both
    /// lists keep only certificates a broker would still accept. nil when
    /// the store cannot read: the caller must not write an empty CRL then.
    func revokedCertificates(now: Int64) -> [RevokedCertificate]?
    /// The MQTT topics of gateways' installations that hold a recorded
    /// certificate, sorted: the certificate clients the broker's acl_file
    /// must give end-node rights (GatewayRules). nil when the store cannot read.
    func gatewayCertificateTopics() -> [String]?
}
