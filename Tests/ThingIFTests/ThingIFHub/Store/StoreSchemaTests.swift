// SPDX-License-Identifier: Apache-2.0

import CSQLite
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// The schema as the hubs before StoreSchema made it, to the letter: the
/// DDL their migrations ran on a new database (SQLite version 6, with the
/// data-moving statements of 2 -> 3 left out, PostgreSQL version 3).
/// Databases made by those hubs must open, and hold the same schema as a
/// new one.
enum EarlierSchema {
    static let sqlite = """
        CREATE TABLE things (
            thing_id TEXT PRIMARY KEY,
            vendor_thing_id TEXT UNIQUE,
            password TEXT,
            thing_type TEXT,
            firmware_version TEXT,
            access_token TEXT NOT NULL UNIQUE,
            data_grouping_interval TEXT,
            state TEXT,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE thing_installations (
            thing_id TEXT NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE,
            installation_id TEXT NOT NULL,
            mqtt_topic TEXT NOT NULL,
            PRIMARY KEY (thing_id, installation_id)
        );
        CREATE INDEX thing_installations_topic ON thing_installations(mqtt_topic);
        CREATE TABLE thing_owners (
            thing_id TEXT NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            PRIMARY KEY (thing_id, owner)
        );
        CREATE TABLE state_samples (
            id INTEGER PRIMARY KEY,
            thing_id TEXT NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE,
            at INTEGER NOT NULL,
            method TEXT NOT NULL,
            upload TEXT NOT NULL,
            state TEXT NOT NULL
        );
        CREATE INDEX state_samples_thing_at ON state_samples(thing_id, at);
        CREATE TABLE commands (
            command_id TEXT PRIMARY KEY,
            seq INTEGER NOT NULL UNIQUE,
            thing_id TEXT NOT NULL,
            issuer TEXT,
            issuing_installation_id TEXT,
            payload TEXT NOT NULL,
            results TEXT,
            state TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            modified_at INTEGER NOT NULL
        );
        CREATE INDEX commands_thing_seq ON commands(thing_id, seq);
        CREATE TABLE users (
            user_id TEXT PRIMARY KEY,
            login_name TEXT UNIQUE,
            password_hash TEXT,
            access_token TEXT NOT NULL UNIQUE,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE groups (
            group_id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            owner_user_id TEXT NOT NULL
        );
        CREATE INDEX groups_owner ON groups(owner_user_id);
        CREATE TABLE group_members (
            group_id TEXT NOT NULL REFERENCES groups(group_id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            user_id TEXT NOT NULL,
            PRIMARY KEY (group_id, position)
        );
        CREATE INDEX group_members_user ON group_members(user_id);
        CREATE TABLE app_installations (
            installation_id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            target TEXT,
            created_at INTEGER NOT NULL
        );
        CREATE INDEX app_installations_user ON app_installations(user_id, created_at);
        CREATE TABLE triggers (
            trigger_id TEXT PRIMARY KEY,
            seq INTEGER NOT NULL UNIQUE,
            thing_id TEXT NOT NULL,
            definition TEXT NOT NULL,
            enabled INTEGER NOT NULL,
            last_match INTEGER,
            created_at INTEGER NOT NULL
        );
        CREATE INDEX triggers_thing ON triggers(thing_id, seq);
        CREATE TABLE thing_automation (
            thing_id TEXT PRIMARY KEY REFERENCES things(thing_id) ON DELETE CASCADE,
            config TEXT NOT NULL,
            version INTEGER NOT NULL
        );
        CREATE TABLE tokens (
            token_hash TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            subject_id TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            revoked INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX tokens_subject ON tokens(kind, subject_id);
        CREATE INDEX tokens_expiry ON tokens(expires_at) WHERE expires_at <> 0;
        CREATE INDEX tokens_revoked ON tokens(revoked) WHERE revoked = 1;
        CREATE INDEX state_samples_thing_id ON state_samples(thing_id, id);
        CREATE TABLE things_new (
            thing_id TEXT PRIMARY KEY,
            vendor_thing_id TEXT UNIQUE,
            password_hash TEXT,
            thing_type TEXT,
            firmware_version TEXT,
            data_grouping_interval TEXT,
            state TEXT,
            created_at INTEGER NOT NULL
        );
        DROP TABLE things;
        ALTER TABLE things_new RENAME TO things;
        CREATE TABLE users_new (
            user_id TEXT PRIMARY KEY,
            login_name TEXT UNIQUE,
            password_hash TEXT,
            created_at INTEGER NOT NULL
        );
        DROP TABLE users;
        ALTER TABLE users_new RENAME TO users;
        ALTER TABLE thing_automation ADD COLUMN report TEXT;
        ALTER TABLE commands ADD COLUMN notify_due INTEGER;
        CREATE INDEX commands_notify_due ON commands(notify_due) WHERE notify_due IS NOT NULL;
        ALTER TABLE commands ADD COLUMN expires_at INTEGER;
        ALTER TABLE commands ADD COLUMN end_reason TEXT;
        CREATE INDEX commands_open ON commands(seq) WHERE results IS NULL AND state IN ('SENDING', 'DELIVERED');
        PRAGMA user_version = 6;
        """

    static let postgres = """
        CREATE TABLE things (
            thing_id TEXT PRIMARY KEY,
            vendor_thing_id TEXT UNIQUE,
            password_hash TEXT,
            thing_type TEXT,
            firmware_version TEXT,
            data_grouping_interval TEXT,
            state TEXT,
            created_at BIGINT NOT NULL
        );
        CREATE TABLE thing_installations (
            id BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
            thing_id TEXT NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE,
            installation_id TEXT NOT NULL,
            mqtt_topic TEXT NOT NULL,
            PRIMARY KEY (thing_id, installation_id)
        );
        CREATE INDEX thing_installations_topic ON thing_installations(mqtt_topic, id);
        CREATE TABLE thing_owners (
            id BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
            thing_id TEXT NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            PRIMARY KEY (thing_id, owner)
        );
        CREATE TABLE state_samples (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            thing_id TEXT NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE,
            at BIGINT NOT NULL,
            method TEXT NOT NULL,
            upload TEXT NOT NULL,
            state TEXT NOT NULL
        );
        CREATE INDEX state_samples_thing_at ON state_samples(thing_id, at);
        CREATE INDEX state_samples_thing_id ON state_samples(thing_id, id);
        CREATE TABLE commands (
            command_id TEXT PRIMARY KEY,
            seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
            thing_id TEXT NOT NULL,
            issuer TEXT,
            issuing_installation_id TEXT,
            payload TEXT NOT NULL,
            results TEXT,
            state TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            modified_at BIGINT NOT NULL
        );
        CREATE INDEX commands_thing_seq ON commands(thing_id, seq);
        CREATE TABLE users (
            user_id TEXT PRIMARY KEY,
            login_name TEXT UNIQUE,
            password_hash TEXT,
            created_at BIGINT NOT NULL
        );
        CREATE TABLE groups (
            group_id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            owner_user_id TEXT NOT NULL
        );
        CREATE INDEX groups_owner ON groups(owner_user_id);
        CREATE TABLE group_members (
            group_id TEXT NOT NULL REFERENCES groups(group_id) ON DELETE CASCADE,
            position BIGINT NOT NULL,
            user_id TEXT NOT NULL,
            PRIMARY KEY (group_id, position)
        );
        CREATE INDEX group_members_user ON group_members(user_id);
        CREATE TABLE app_installations (
            id BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
            installation_id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            target TEXT,
            created_at BIGINT NOT NULL
        );
        CREATE INDEX app_installations_user ON app_installations(user_id, created_at, id);
        CREATE TABLE triggers (
            trigger_id TEXT PRIMARY KEY,
            seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
            thing_id TEXT NOT NULL,
            definition TEXT NOT NULL,
            enabled INTEGER NOT NULL,
            last_match INTEGER,
            created_at BIGINT NOT NULL
        );
        CREATE INDEX triggers_thing ON triggers(thing_id, seq);
        CREATE TABLE thing_automation (
            thing_id TEXT PRIMARY KEY REFERENCES things(thing_id) ON DELETE CASCADE,
            config TEXT NOT NULL,
            version BIGINT NOT NULL,
            report TEXT
        );
        CREATE TABLE tokens (
            token_hash TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            subject_id TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            revoked INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX tokens_subject ON tokens(kind, subject_id);
        CREATE INDEX tokens_expiry ON tokens(expires_at) WHERE expires_at <> 0;
        CREATE INDEX tokens_revoked ON tokens(revoked) WHERE revoked = 1;
        ALTER TABLE commands ADD COLUMN notify_due BIGINT;
        CREATE INDEX commands_notify_due ON commands(notify_due) WHERE notify_due IS NOT NULL;
        ALTER TABLE commands ADD COLUMN expires_at BIGINT;
        ALTER TABLE commands ADD COLUMN end_reason TEXT;
        CREATE INDEX commands_open ON commands(seq) WHERE results IS NULL AND state IN ('SENDING', 'DELIVERED');
        CREATE TABLE thingif_schema (version BIGINT NOT NULL);
        INSERT INTO thingif_schema (version) VALUES (3);
        """
}

/// The schema of an SQLite file as comparable lines: columns, indexes
/// (automatic ones by their columns, not their names), foreign keys and
/// partial indexes' conditions.
func sqliteSchema(_ path: String) throws -> [String] {
    var db: OpaquePointer?
    guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else {
        sqlite3_close_v2(db)
        throw HarnessError("cannot open \(path)")
    }
    defer { sqlite3_close_v2(db) }
    let sql = """
        SELECT 'col ' || m.name || ' ' || p.cid || ' ' || p.name || ' ' || p.type || ' ' || p."notnull" || ' '
            || ifnull(p.dflt_value, '-') || ' ' || p.pk
        FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table'
        UNION ALL
        SELECT 'idx ' || m.name || ' ' || CASE il.origin WHEN 'c' THEN il.name ELSE il.origin END || ' '
            || il."unique" || ' ' || il.partial || ' ' || ii.seqno || ' ' || ifnull(ii.name, '-')
        FROM sqlite_master m, pragma_index_list(m.name) il, pragma_index_info(il.name) ii WHERE m.type = 'table'
        UNION ALL
        SELECT 'fk ' || m.name || ' ' || f."from" || ' ' || f."table" || ' ' || f."to" || ' ' || f.on_delete
        FROM sqlite_master m, pragma_foreign_key_list(m.name) f WHERE m.type = 'table'
        UNION ALL
        SELECT 'where ' || name || substr(sql, instr(sql, ' WHERE '))
        FROM sqlite_master WHERE type = 'index' AND sql LIKE '% WHERE %'
        ORDER BY 1
        """
    var stmt: OpaquePointer?
    guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else { throw HarnessError("cannot prepare") }
    defer { sqlite3_finalize(stmt) }
    var out: [String] = []
    while sqlite3_step(stmt) == SQLITE_ROW { out.append(String(cString: sqlite3_column_text(stmt, 0))) }
    return out
}

/// The schema of a PostgreSQL database as comparable lines.
func postgresSchema(_ server: PostgresServer, _ database: String) throws -> [String] {
    try server.psql(
        """
        SELECT 'col ' || table_name || ' ' || ordinal_position || ' ' || column_name || ' ' || data_type || ' '
            || is_nullable || ' ' || coalesce(column_default, '-') || ' ' || is_identity
        FROM information_schema.columns WHERE table_schema = 'public'
        UNION ALL SELECT 'idx ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
        UNION ALL SELECT 'con ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'public'::regnamespace
        ORDER BY 1
        """, database: database
    ).split(separator: "\n").map(String.init)
}

/// A store of either kind is used a little: what every table takes.
private func exercise(_ s: HubStore) throws {
    let t = try s.registerThing(
        vendorThingID: "AC-SCHEMA", password: "pw", thingType: "AirConditioner", firmwareVersion: nil,
        dataGroupingInterval: nil, layoutPosition: nil
    ).get()
    #expect(s.thing(accessToken: t.accessToken)?.thingID == t.thingID)
    #expect(s.addInstallation(thingID: t.thingID, installationID: "i1", mqttTopic: "topic1"))
    #expect(s.addOwner(thingID: t.thingID, owner: "user:u1"))
    #expect(s.applyState(thingID: t.thingID, method: "PUT", upload: #"{"p":1}"#, at: 5) == #"{"p":1}"#)
    let c = try #require(
        s.insertCommand(
            CommandRecord(
                commandID: "c-schema", thingID: t.thingID, issuer: "user:u1", issuingInstallationID: nil,
                payload: "{}", createdAt: 1, modifiedAt: 1)))
    #expect(c.seq > 0)
    #expect(s.setCommandExpiry(commandID: "c-schema", expiresAt: 3))
    #expect(s.endCommand(commandID: "c-schema", state: .expired, reason: "expired", at: 4))
    let u = try #require(s.createUser(loginName: "schema", passwordHash: "h"))
    #expect(s.createGroup(name: "g", ownerUserID: u.userID, members: [u.userID]) != nil)
    #expect(s.addAppInstallation(userID: u.userID, kind: .sse, target: nil) != nil)
    #expect(
        s.insertTrigger(ServerTriggerRecord(triggerID: "trg-s", thingID: t.thingID, definition: "{}", createdAt: 1)))
    #expect(s.saveAutomation(thingID: t.thingID, config: "{}")?.version == 1)
    #expect(s.saveAutomationReport(thingID: t.thingID, report: "{}"))
    #expect(s.recordCertificate(thingID: t.thingID, installationID: "i1", serial: "01", notAfter: Int64.max))
    #expect(s.removeInstallation(thingID: t.thingID, installationID: "i1"))
    #expect(s.revokedCertificates(now: 1)?.map(\.serial) == ["01"])
}

@Suite("One schema (StoreSchema)", .offPool)
struct StoreSchemaTests {
    /// A schema line of what the migrations after EarlierSchema added.
    static func addedSinceEarlier(_ line: String) -> Bool {
        line.contains(" unpruned_samples ") || line.contains("thing_certificates")
            || line.contains("revoked_certificates") || line.contains("layout_position")
            || line.contains("gateway_thing_id") || line.contains("things_gateway")
            // The firmware images (SQLite 10, PostgreSQL 7).
            || line.contains("image")
            // The update jobs (SQLite 11, PostgreSQL 8).
            || line.contains("update_jobs")
            // The rollouts and their members (SQLite 12, PostgreSQL 9).
            || line.contains("rollout")
            // The trait registry (SQLite 14, PostgreSQL 11).
            || line.contains("thing_types") || line.contains("firmware_versions") || line.contains("trait_")
            // The request partitions' leases (SQLite 16, PostgreSQL 13).
            || line.contains("partition_")
    }

    @Test("SQLite: a database the earlier hubs made opens and has a new one's schema; so has one migrated from 1")
    func sqlite() throws {
        let dir = try makeTempDirectory(prefix: "thingif-schema")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fresh = dir + "/new.sqlite"
        try SQLiteStore(path: fresh, secrets: .fastForTests).close()
        let expected = try sqliteSchema(fresh)
        #expect(expected.contains { $0.hasPrefix("col commands ") && $0.contains(" end_reason ") })

        let earlier = dir + "/earlier.sqlite"
        var db: OpaquePointer?
        #expect(sqlite3_open_v2(earlier, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK)
        #expect(sqlite3_exec(db, EarlierSchema.sqlite, nil, nil, nil) == SQLITE_OK)
        sqlite3_close_v2(db)
        // The earlier hubs' schema is the new one but for what versions 7
        // (unpruned_samples), 8 (the certificate tables), 9 (things'
        // layout and gateway), 10 (firmware images), 11 (update jobs) and 12
        // (rollouts) added.
        #expect(try sqliteSchema(earlier) == expected.filter { !Self.addedSinceEarlier($0) })
        let s = try SQLiteStore(path: earlier, secrets: .fastForTests)
        try exercise(s)
        s.close()
        #expect(try sqliteSchema(earlier) == expected)

        let migrated = dir + "/v1.sqlite"
        try SQLiteStore(path: migrated, secrets: .fastForTests, retention: StateRetention(), migrateTo: 1).close()
        let m = try SQLiteStore(path: migrated, secrets: .fastForTests)
        try exercise(m)
        m.close()
        #expect(try sqliteSchema(migrated) == expected)
    }

    @Test(
        "PostgreSQL: a database the earlier hubs made opens and has a new one's schema; so has one migrated from 1",
        .enabled(if: PostgresServer.enabled))
    func postgres() throws {
        let server = try PostgresServer.get()
        let (fresh, freshURL) = try server.createDatabase()
        defer { server.dropDatabase(fresh) }
        try PostgresStore(url: freshURL, secrets: .fastForTests).close()
        let expected = try postgresSchema(server, fresh)
        #expect(expected.contains { $0.hasPrefix("col commands ") && $0.contains(" end_reason ") })

        let (earlier, earlierURL) = try server.createDatabase()
        defer { server.dropDatabase(earlier) }
        try server.psql(EarlierSchema.postgres, database: earlier)
        // The earlier hubs' schema is the new one but for what versions 4
        // (unpruned_samples), 5 (the certificate tables), 6 (things'
        // layout and gateway), 7 (firmware images), 8 (update jobs) and 9
        // (rollouts) added.
        #expect(try postgresSchema(server, earlier) == expected.filter { !Self.addedSinceEarlier($0) })
        let s = try PostgresStore(url: earlierURL, secrets: .fastForTests)
        try exercise(s)
        s.close()
        #expect(try postgresSchema(server, earlier) == expected)

        let (migrated, migratedURL) = try server.createDatabase()
        defer { server.dropDatabase(migrated) }
        try PostgresStore(
            url: migratedURL, secrets: .fastForTests, retention: StateRetention(), timeout: 5, migrateTo: 1
        ).close()
        let m = try PostgresStore(url: migratedURL, secrets: .fastForTests)
        try exercise(m)
        m.close()
        #expect(try postgresSchema(server, migrated) == expected)
    }

    @Test("SQLite 8 -> 9: the things of a version 8 database are STANDALONE, without a gateway; end nodes work after")
    func sqliteGateways() throws {
        let dir = try makeTempDirectory(prefix: "thingif-schema")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fresh = dir + "/new.sqlite"
        try SQLiteStore(path: fresh, secrets: .fastForTests).close()
        let path = dir + "/v8.sqlite"
        try SQLiteStore(path: path, secrets: .fastForTests, retention: StateRetention(), migrateTo: 8).close()
        #expect(try !sqliteSchema(path).contains { $0.contains("layout_position") })
        var db: OpaquePointer?
        #expect(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK)
        #expect(sqlite3_exec(db, Self.version8Thing, nil, nil, nil) == SQLITE_OK)
        sqlite3_close_v2(db)
        let s = try SQLiteStore(path: path, secrets: .fastForTests)
        try Self.gatewaysAfterMigration(s)
        s.close()
        #expect(try sqliteSchema(path) == sqliteSchema(fresh))
    }

    @Test(
        "PostgreSQL 5 -> 6: the things of a version 5 database are STANDALONE, without a gateway; end nodes work after",
        .enabled(if: PostgresServer.enabled))
    func postgresGateways() throws {
        let server = try PostgresServer.get()
        let (fresh, freshURL) = try server.createDatabase()
        defer { server.dropDatabase(fresh) }
        try PostgresStore(url: freshURL, secrets: .fastForTests).close()
        let (name, url) = try server.createDatabase()
        defer { server.dropDatabase(name) }
        try PostgresStore(url: url, secrets: .fastForTests, retention: StateRetention(), timeout: 5, migrateTo: 5)
            .close()
        #expect(try !postgresSchema(server, name).contains { $0.contains("layout_position") })
        try server.psql(Self.version8Thing, database: name)
        let s = try PostgresStore(url: url, secrets: .fastForTests)
        try Self.gatewaysAfterMigration(s)
        s.close()
        #expect(try postgresSchema(server, name) == postgresSchema(server, fresh))
    }

    /// A thing as the version before gateways stored it (SQLite 8,
    /// PostgreSQL 5: the same columns), its password "pw" hashed at the
    /// tests' cost, with an owner.
    static let version8Thing = """
        INSERT INTO things (thing_id, vendor_thing_id, password_hash, thing_type, created_at)
        VALUES ('th.v8', 'AC-V8', '\(PasswordHash.make("pw", iterations: 1000))', 'AirConditioner', 1);
        INSERT INTO thing_owners (thing_id, owner) VALUES ('th.v8', 'user:u1');
        """

    /// What a store migrated over `version8Thing` must read and do.
    static func gatewaysAfterMigration(_ s: HubStore) throws {
        let t = try #require(s.thing(id: "th.v8"))
        #expect(t.layoutPosition == .standalone && t.gatewayThingID == nil && t.owners == ["user:u1"])
        // Registered again: still STANDALONE; it cannot become a gateway.
        let again = try s.registerThing(
            vendorThingID: "AC-V8", password: "pw", thingType: nil, firmwareVersion: nil, dataGroupingInterval: nil,
            layoutPosition: nil
        ).get()
        #expect(again.thingID == "th.v8" && again.layoutPosition == .standalone)
        let named = s.registerThing(
            vendorThingID: "AC-V8", password: "pw", thingType: nil, firmwareVersion: nil, dataGroupingInterval: nil,
            layoutPosition: .gateway)
        guard case .failure(.wrongLayout) = named else {
            Issue.record("a STANDALONE thing registered as a gateway: \(named)")
            return
        }
        guard
            case .notAGateway = s.onboardEndNode(
                gatewayThingID: "th.v8", vendorThingID: "EN-V8", password: "np", thingType: nil,
                firmwareVersion: nil, owners: [], maxEndNodes: 10)
        else {
            Issue.record("an end node onboarded onto a STANDALONE thing")
            return
        }
        // A gateway and its end node, listed, deleted together.
        let g = try s.registerThing(
            vendorThingID: "GW-V8", password: "pw", thingType: nil, firmwareVersion: nil, dataGroupingInterval: nil,
            layoutPosition: .gateway
        ).get()
        guard
            case .onboarded(let e, created: true) = s.onboardEndNode(
                gatewayThingID: g.thingID, vendorThingID: "EN-V8", password: "np", thingType: nil,
                firmwareVersion: nil, owners: ["user:u1"], maxEndNodes: 10)
        else {
            Issue.record("no end node onboarded")
            return
        }
        #expect(s.thing(id: e.thingID)?.gatewayThingID == g.thingID)
        #expect(s.endNodes(gatewayThingID: g.thingID, after: nil, limit: 10)?.endNodes.map(\.thingID) == [e.thingID])
        #expect(s.endNodeCount(gatewayThingID: g.thingID) == 1)
        #expect(s.deleteThing(id: g.thingID))
        #expect(s.thing(id: e.thingID) == nil && s.thing(id: "th.v8") != nil)
    }

    @Test("Each dialect's DDL from the one description: types, numbering, insertion order")
    func ddl() {
        let samples = StoreSchema.table("state_samples")
        #expect(samples.ddl(.sqlite).contains("id INTEGER PRIMARY KEY,"))
        #expect(samples.ddl(.postgres).contains("id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"))
        #expect(samples.ddl(.postgres).contains("at BIGINT NOT NULL"))
        let owners = StoreSchema.table("thing_owners")
        #expect(!owners.ddl(.sqlite).contains(" id "))
        #expect(owners.ddl(.postgres).contains("id BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE"))
        #expect(StoreSchema.index("thing_installations_topic").ddl(.postgres).hasSuffix("(mqtt_topic, id)"))
        #expect(StoreSchema.index("thing_installations_topic").ddl(.sqlite).hasSuffix("(mqtt_topic)"))
        // Version 1 of PostgreSQL is everything but what its later migrations add.
        let v1 = PostgresStore.migrations[0].map { $0.ddl(.postgres) }.joined(separator: "\n")
        #expect(!v1.contains("notify_due") && !v1.contains("end_reason") && v1.contains("CREATE TABLE tokens"))
    }
}
