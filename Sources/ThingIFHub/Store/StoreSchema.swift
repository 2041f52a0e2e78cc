// SPDX-License-Identifier: Apache-2.0

/// The two SQL dialects the hub stores in.
enum SQLDialect: Sendable {
    case sqlite
    case postgres
}

/// The SQL stores' schema, described once: every table, column and index
/// that SQLiteStore and PostgresStore keep. Each dialect's DDL is made from
/// it (`ddl`): a new database gets all of it (`createAll`), an older one
/// the steps of its dialect's migrations, which name what they add here
/// rather than spell it again. Only what an old version had that this
/// description no longer holds (the first hubs' raw-token columns) stays
/// written out in the migration that made it.
///
/// What differs between the dialects is said by the kinds, not per table:
/// integers are SQLite's INTEGER and PostgreSQL's BIGINT; a key or a
/// listing order the database numbers is SQLite's rowid (the store takes
/// MAX + 1 for `seq`: one writer) and PostgreSQL's identity; a table read
/// in insertion order has SQLite's implicit rowid and a PostgreSQL identity
/// column `id` (its indexes end in it, as SQLite's end in rowid).
enum StoreSchema {
    struct Column {
        enum Kind {
            case text
            /// 64-bit: times (ms), versions, positions.
            case integer
            /// 0 or 1: INTEGER in both.
            case flag
            /// The table's key, numbered by the database (a cursor).
            case rowID
            /// A listing order numbered on insert, UNIQUE.
            case sequence
            /// Raw bytes: SQLite's BLOB, PostgreSQL's BYTEA (an image's chunks).
            case bytes
        }

        let name: String
        let kind: Kind
        /// What follows the type, the same in both dialects (NOT NULL,
        /// PRIMARY KEY, UNIQUE, REFERENCES, DEFAULT).
        let rest: String

        init(_ name: String, _ kind: Kind, _ rest: String = "") {
            self.name = name
            self.kind = kind
            self.rest = rest
        }

        func ddl(_ d: SQLDialect) -> String {
            let type: String
            switch (kind, d) {
            case (.text, _): type = "TEXT"
            case (.integer, .sqlite), (.flag, _): type = "INTEGER"
            case (.integer, .postgres): type = "BIGINT"
            case (.rowID, .sqlite): type = "INTEGER PRIMARY KEY"
            case (.rowID, .postgres): type = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
            case (.sequence, .sqlite): type = "INTEGER NOT NULL UNIQUE"
            case (.sequence, .postgres): type = "BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE"
            case (.bytes, .sqlite): type = "BLOB"
            case (.bytes, .postgres): type = "BYTEA"
            }
            return rest.isEmpty ? "\(name) \(type)" : "\(name) \(type) \(rest)"
        }
    }

    struct Table {
        let name: String
        let columns: [Column]
        /// A key of several columns ("" for none).
        let primaryKey: String
        /// Read in insertion order (rowid, or PostgreSQL's `id`).
        let ordered: Bool
        /// Constraints of several columns (a composite FOREIGN KEY).
        let constraints: [String]

        init(
            _ name: String, ordered: Bool = false, primaryKey: String = "", _ columns: [Column],
            constraints: [String] = []
        ) {
            self.name = name
            self.columns = columns
            self.primaryKey = primaryKey
            self.ordered = ordered
            self.constraints = constraints
        }

        /// CREATE TABLE, named `name` (a rebuild's new table), without the
        /// columns a later migration adds.
        func ddl(_ d: SQLDialect, name: String? = nil, without: Set<String> = []) -> String {
            var lines: [String] = []
            if ordered && d == .postgres { lines.append("id BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE") }
            lines += columns.filter { !without.contains($0.name) }.map { $0.ddl(d) }
            if !primaryKey.isEmpty { lines.append("PRIMARY KEY (\(primaryKey))") }
            lines += constraints
            return "CREATE TABLE \(name ?? self.name) (\n    " + lines.joined(separator: ",\n    ") + "\n)"
        }
    }

    struct Index {
        let name: String
        let table: String
        let columns: String
        /// A partial index's condition.
        let condition: String?

        init(_ name: String, on table: String, _ columns: String, where condition: String? = nil) {
            self.name = name
            self.table = table
            self.columns = columns
            self.condition = condition
        }

        func ddl(_ d: SQLDialect) -> String {
            // An index of a table read in insertion order ends in that
            // order: PostgreSQL's `id`, SQLite's implicit rowid.
            let tail = d == .postgres && StoreSchema.table(table).ordered ? ", id" : ""
            return "CREATE INDEX \(name) ON \(table)(\(columns)\(tail))" + (condition.map { " WHERE " + $0 } ?? "")
        }
    }

    /// The condition of an open command (the partial index commands_open).
    static let openCommand = "results IS NULL AND state IN ('SENDING', 'DELIVERED')"

    /// Parents before children (PostgreSQL checks REFERENCES at CREATE).
    static let tables: [Table] = [
        Table(
            "things",
            [
                Column("thing_id", .text, "PRIMARY KEY"),
                Column("vendor_thing_id", .text, "UNIQUE"),
                Column("password_hash", .text),
                Column("thing_type", .text),
                Column("firmware_version", .text),
                Column("data_grouping_interval", .text),
                Column("state", .text),
                Column("created_at", .integer, "NOT NULL"),
                // Samples uploaded since the count-based retention last ran
                // (StateRetention.pruneEvery).
                Column("unpruned_samples", .integer, "NOT NULL DEFAULT 0"),
                // LayoutPosition's raw value, set at the first registration.
                Column("layout_position", .text, "NOT NULL DEFAULT 'STANDALONE'"),
                // An end node's gateway. The reference keeps an end node
                // from outliving it: deleteThing deletes the end nodes
                // first, and a deletion that left one would fail.
                Column("gateway_thing_id", .text, "REFERENCES things(thing_id)")
            ]),
        Table(
            "thing_installations", ordered: true, primaryKey: "thing_id, installation_id",
            [
                Column("thing_id", .text, "NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE"),
                Column("installation_id", .text, "NOT NULL"),
                Column("mqtt_topic", .text, "NOT NULL")
            ]),
        Table(
            "thing_owners", ordered: true, primaryKey: "thing_id, owner",
            [
                Column("thing_id", .text, "NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE"),
                Column("owner", .text, "NOT NULL")
            ]),
        Table(
            "state_samples",
            [
                Column("id", .rowID),
                Column("thing_id", .text, "NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE"),
                Column("at", .integer, "NOT NULL"),
                Column("method", .text, "NOT NULL"),
                Column("upload", .text, "NOT NULL"),
                Column("state", .text, "NOT NULL")
            ]),
        // No foreign key on thing_id: like MemoryStore, the store keeps
        // whatever command it is given (the framework checks the thing).
        Table(
            "commands",
            [
                Column("command_id", .text, "PRIMARY KEY"),
                Column("seq", .sequence),
                Column("thing_id", .text, "NOT NULL"),
                Column("issuer", .text),
                Column("issuing_installation_id", .text),
                Column("payload", .text, "NOT NULL"),
                Column("results", .text),
                Column("state", .text, "NOT NULL"),
                Column("created_at", .integer, "NOT NULL"),
                Column("modified_at", .integer, "NOT NULL"),
                // When its notification may be claimed by a sweep (NULL:
                // sent, or nothing to send).
                Column("notify_due", .integer),
                // CommandLifecycle: its expiry and why the hub ended it.
                Column("expires_at", .integer),
                Column("end_reason", .text)
            ]),
        Table(
            "users",
            [
                Column("user_id", .text, "PRIMARY KEY"),
                Column("login_name", .text, "UNIQUE"),
                Column("password_hash", .text),
                Column("created_at", .integer, "NOT NULL")
            ]),
        Table(
            "groups",
            [
                Column("group_id", .text, "PRIMARY KEY"),
                Column("name", .text, "NOT NULL"),
                Column("owner_user_id", .text, "NOT NULL")
            ]),
        // position keeps the members' order (and duplicates) as given.
        Table(
            "group_members", primaryKey: "group_id, position",
            [
                Column("group_id", .text, "NOT NULL REFERENCES groups(group_id) ON DELETE CASCADE"),
                Column("position", .integer, "NOT NULL"),
                Column("user_id", .text, "NOT NULL")
            ]),
        Table(
            "app_installations", ordered: true,
            [
                Column("installation_id", .text, "PRIMARY KEY"),
                Column("user_id", .text, "NOT NULL"),
                Column("kind", .text, "NOT NULL"),
                Column("target", .text),
                Column("created_at", .integer, "NOT NULL")
            ]),
        Table(
            "triggers",
            [
                Column("trigger_id", .text, "PRIMARY KEY"),
                Column("seq", .sequence),
                Column("thing_id", .text, "NOT NULL"),
                Column("definition", .text, "NOT NULL"),
                Column("enabled", .flag, "NOT NULL"),
                Column("last_match", .flag),
                Column("created_at", .integer, "NOT NULL")
            ]),
        Table(
            "thing_automation",
            [
                Column("thing_id", .text, "PRIMARY KEY REFERENCES things(thing_id) ON DELETE CASCADE"),
                Column("config", .text, "NOT NULL"),
                Column("version", .integer, "NOT NULL"),
                // The thing's report on applying the config.
                Column("report", .text)
            ]),
        // Access tokens as SHA-256 (hex), never raw.
        Table(
            "tokens",
            [
                Column("token_hash", .text, "PRIMARY KEY"),
                Column("kind", .text, "NOT NULL"),
                Column("subject_id", .text, "NOT NULL"),
                Column("created_at", .integer, "NOT NULL"),
                Column("expires_at", .integer, "NOT NULL"),
                Column("revoked", .flag, "NOT NULL DEFAULT 0")
            ]),
        // The certificates the things' CA signed, per MQTT installation
        // (several per installation: a thing that onboards again gets a new
        // one for the same topic); kept until they expire, to be revoked.
        Table(
            "thing_certificates",
            [
                Column("serial", .text, "PRIMARY KEY"),
                Column("thing_id", .text, "NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE"),
                Column("installation_id", .text, "NOT NULL"),
                Column("not_after", .integer, "NOT NULL"),
                Column("issued_at", .integer, "NOT NULL")
            ]),
        // What the things' CRL lists: no thing_id (the thing is gone), kept
        // until the certificate expires.
        Table(
            "revoked_certificates",
            [
                Column("serial", .text, "PRIMARY KEY"),
                Column("revoked_at", .integer, "NOT NULL"),
                Column("not_after", .integer, "NOT NULL")
            ]),
        // Firmware images, content-addressed (ImageStore): one row each,
        // written only when an upload's last chunk is staged and its hash known.
        Table(
            "images",
            [
                Column("sha256", .text, "PRIMARY KEY"),
                Column("size", .integer, "NOT NULL"),
                Column("created_at", .integer, "NOT NULL"),
                // The key its chunks are under: the upload's ("upload:<id>"),
                // kept as it was staged so that a commit renames no row;
                // NULL for an image committed before (its chunks are under
                // its SHA-256).
                Column("chunks", .text)
            ]),
        // An image's bytes in chunks of ImageChunks.size (32 KiB, the
        // largest block), so that a block is one row's read. `image` is the
        // key the image's row names (`images.chunks`, or its SHA-256), or
        // the "upload:<id>" of an upload still staged.
        Table(
            "image_chunks", primaryKey: "image, n",
            [
                Column("image", .text, "NOT NULL"),
                Column("n", .integer, "NOT NULL"),
                Column("bytes", .bytes, "NOT NULL")
            ]),
        // An image's block hash list for one block size (32 bytes a block),
        // computed once from its chunks and kept: a rollout's things each
        // fetch it.
        Table(
            "image_block_hashes", primaryKey: "image, block_size",
            [
                Column("image", .text, "NOT NULL REFERENCES images(sha256) ON DELETE CASCADE"),
                Column("block_size", .integer, "NOT NULL"),
                Column("hashes", .bytes, "NOT NULL")
            ]),
        // A thing's update jobs (UpdateJobStore): what was offered and the
        // thing's last report applied (`seq` -1 before any). `image` names
        // no row of images: a job stays readable after its image is deleted
        // (its blocks are then not served).
        Table(
            "update_jobs",
            [
                Column("job_id", .text, "PRIMARY KEY"),
                Column("thing_id", .text, "NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE"),
                Column("image", .text, "NOT NULL"),
                Column("version", .text, "NOT NULL"),
                Column("manifest", .bytes, "NOT NULL"),
                Column("block_size", .integer, "NOT NULL"),
                Column("blocks", .integer, "NOT NULL"),
                Column("attempt", .integer, "NOT NULL"),
                Column("command_id", .text, "NOT NULL"),
                Column("status", .text),
                Column("seq", .integer, "NOT NULL"),
                Column("bytes", .integer),
                Column("of_bytes", .integer),
                Column("reason", .text),
                Column("step", .text),
                Column("reported_version", .text),
                Column("created_at", .integer, "NOT NULL"),
                Column("updated_at", .integer, "NOT NULL")
            ]),
        // Rollouts (RolloutStore): the offer each member gets, the pace,
        // the abort criteria (`abort_statuses` comma-separated), the status.
        Table(
            "rollouts",
            [
                Column("rollout_id", .text, "PRIMARY KEY"),
                Column("image", .text, "NOT NULL"),
                Column("version", .text, "NOT NULL"),
                Column("manifest", .bytes, "NOT NULL"),
                Column("signatures", .text, "NOT NULL"),
                Column("trial_s", .integer),
                Column("target", .text, "NOT NULL"),
                Column("rate_per_minute", .integer, "NOT NULL"),
                Column("max_in_flight", .integer, "NOT NULL"),
                Column("abort_failure_percent", .integer),
                Column("abort_min_executed", .integer, "NOT NULL"),
                Column("abort_statuses", .text, "NOT NULL"),
                Column("status", .text, "NOT NULL"),
                Column("reason", .text),
                Column("created_at", .integer, "NOT NULL"),
                Column("updated_at", .integer, "NOT NULL"),
                Column("timeout_s", .integer),
                Column("retries", .integer, "NOT NULL DEFAULT 0"),
                // The ramp as RolloutRamp.json writes it; NULL: none.
                Column("ramp", .text)
            ]),
        // A rollout's things, resolved at its creation: `state` queued,
        // offered, or its job's final status; `job_id` set when released
        // (before the job is created), `released_at` the rate's window.
        Table(
            "rollout_members", primaryKey: "rollout_id, thing_id",
            [
                Column("rollout_id", .text, "NOT NULL REFERENCES rollouts(rollout_id) ON DELETE CASCADE"),
                Column("thing_id", .text, "NOT NULL REFERENCES things(thing_id) ON DELETE CASCADE"),
                Column("state", .text, "NOT NULL"),
                Column("job_id", .text),
                Column("released_at", .integer),
                // Releases that reached a job: the job's attempt.
                Column("attempts", .integer, "NOT NULL DEFAULT 0")
            ]),
        // The trait registry (TraitStore, docs/decisions/kii-trait-registry.md):
        // thing types, their firmware versions, trait versions (immutable
        // once stored: `definition` is the canonical JSON) and the aliases
        // that bind a trait version to a thing type and firmware version.
        // Nothing is deleted: entries only grow.
        Table(
            "thing_types",
            [Column("thing_type", .text, "PRIMARY KEY"), Column("created_at", .integer, "NOT NULL")]),
        Table(
            "firmware_versions", primaryKey: "thing_type, firmware_version",
            [
                Column("thing_type", .text, "NOT NULL REFERENCES thing_types(thing_type)"),
                Column("firmware_version", .text, "NOT NULL"),
                Column("created_at", .integer, "NOT NULL")
            ]),
        Table(
            "trait_versions", primaryKey: "trait, version",
            [
                Column("trait", .text, "NOT NULL"),
                Column("version", .integer, "NOT NULL"),
                Column("definition", .text, "NOT NULL"),
                Column("created_at", .integer, "NOT NULL")
            ]),
        Table(
            "trait_aliases", primaryKey: "thing_type, firmware_version, alias",
            [
                Column("thing_type", .text, "NOT NULL"),
                Column("firmware_version", .text, "NOT NULL"),
                Column("alias", .text, "NOT NULL"),
                Column("trait", .text, "NOT NULL"),
                Column("trait_version", .integer, "NOT NULL"),
                Column("created_at", .integer, "NOT NULL")
            ],
            constraints: [
                "FOREIGN KEY (thing_type, firmware_version) REFERENCES firmware_versions(thing_type, firmware_version)",
                "FOREIGN KEY (trait, trait_version) REFERENCES trait_versions(trait, version)"
            ]),
        // The request partitions' leases among hubs (PostgresStore+Partitions;
        // an SQLite file has one hub, which holds every partition: unused there).
        Table(
            "partition_leases",
            [
                Column("part", .integer, "PRIMARY KEY"),
                Column("hub_id", .text, "NOT NULL"),
                Column("expires_at", .integer, "NOT NULL")
            ]),
        Table(
            "partition_hubs",
            [Column("hub_id", .text, "PRIMARY KEY"), Column("expires_at", .integer, "NOT NULL")])
    ]

    static let indexes: [Index] = [
        // A gateway's end nodes in the list's order; also what the
        // reference's check reads when a thing is deleted.
        Index("things_gateway", on: "things", "gateway_thing_id, created_at"),
        Index("thing_installations_topic", on: "thing_installations", "mqtt_topic"),
        Index("state_samples_thing_at", on: "state_samples", "thing_id, at"),
        Index("state_samples_thing_id", on: "state_samples", "thing_id, id"),
        Index("commands_thing_seq", on: "commands", "thing_id, seq"),
        Index("commands_notify_due", on: "commands", "notify_due", where: "notify_due IS NOT NULL"),
        // The lifecycle sweep reads the open commands only.
        Index("commands_open", on: "commands", "seq", where: openCommand),
        Index("groups_owner", on: "groups", "owner_user_id"),
        Index("group_members_user", on: "group_members", "user_id"),
        Index("app_installations_user", on: "app_installations", "user_id, created_at"),
        Index("triggers_thing", on: "triggers", "thing_id, seq"),
        Index("tokens_subject", on: "tokens", "kind, subject_id"),
        // For the pruning at each issue, without a scan of the table.
        Index("tokens_expiry", on: "tokens", "expires_at", where: "expires_at <> 0"),
        Index("tokens_revoked", on: "tokens", "revoked", where: "revoked = 1"),
        Index("thing_certificates_thing", on: "thing_certificates", "thing_id, installation_id"),
        // For the pruning of expired certificates, without a scan.
        Index("thing_certificates_expiry", on: "thing_certificates", "not_after"),
        Index("revoked_certificates_expiry", on: "revoked_certificates", "not_after"),
        // A thing's jobs, newest first, and its open one's check.
        Index("update_jobs_thing", on: "update_jobs", "thing_id, created_at"),
        // A report's member, by its job.
        Index("rollout_members_job", on: "rollout_members", "job_id", where: "job_id IS NOT NULL"),
        // A thing deleted: its memberships, without a scan.
        Index("rollout_members_thing", on: "rollout_members", "thing_id")
    ]

    /// The migration that added the things' certificates (SQLite 7 -> 8,
    /// PostgreSQL 4 -> 5).
    static let certificateSteps: [Step] = [
        .table("thing_certificates"), .index("thing_certificates_thing"), .index("thing_certificates_expiry"),
        .table("revoked_certificates"), .index("revoked_certificates_expiry")
    ]

    /// The migration that added gateways and end nodes (SQLite 8 -> 9,
    /// PostgreSQL 5 -> 6): things already there are STANDALONE.
    static let gatewaySteps: [Step] = [
        .column("things", "layout_position"), .column("things", "gateway_thing_id"), .index("things_gateway")
    ]

    /// The migration that added firmware images (SQLite 9 -> 10,
    /// PostgreSQL 6 -> 7).
    static let imageSteps: [Step] = [
        .table("images", without: ["chunks"]), .table("image_chunks"), .table("image_block_hashes")
    ]

    /// The migration that added update jobs (SQLite 10 -> 11, PostgreSQL 7 -> 8).
    static let updateJobSteps: [Step] = [.table("update_jobs"), .index("update_jobs_thing")]

    /// The migration that added rollouts (SQLite 11 -> 12, PostgreSQL 8 -> 9).
    static let rolloutSteps: [Step] = [
        .table("rollouts", without: ["timeout_s", "retries", "ramp"]),
        .table("rollout_members", without: ["attempts"]), .index("rollout_members_job"),
        .index("rollout_members_thing")
    ]

    /// The migration that added rollouts' time-outs, retries and ramp
    /// (SQLite 12 -> 13, PostgreSQL 9 -> 10).
    static let rolloutRetrySteps: [Step] = [
        .column("rollouts", "timeout_s"), .column("rollouts", "retries"), .column("rollouts", "ramp"),
        .column("rollout_members", "attempts")
    ]

    /// The migration that added the trait registry (SQLite 13 -> 14,
    /// PostgreSQL 10 -> 11; the version numbers are SQLiteStore's and
    /// PostgresStore's `schemaVersion` and their `migrations` lists only).
    static let traitSteps: [Step] = [
        .table("thing_types"), .table("firmware_versions"), .table("trait_versions"), .table("trait_aliases")
    ]

    /// The migration that keeps an image's chunks under its upload's key
    /// (SQLite 14 -> 15, PostgreSQL 11 -> 12): a commit no longer renames
    /// them (docs/decisions/update-hub-images.md).
    static let imageChunkKeySteps: [Step] = [.column("images", "chunks")]

    /// The migration that added the request partitions' leases (SQLite
    /// 15 -> 16, PostgreSQL 12 -> 13).
    static let partitionSteps: [Step] = [.table("partition_leases"), .table("partition_hubs")]

    static func table(_ name: String) -> Table {
        guard let t = tables.first(where: { $0.name == name }) else { preconditionFailure("no table \(name)") }
        return t
    }

    static func index(_ name: String) -> Index {
        guard let i = indexes.first(where: { $0.name == name }) else { preconditionFailure("no index \(name)") }
        return i
    }

    /// One step of a migration.
    enum Step {
        /// CREATE TABLE from the description, without the columns a later step adds.
        case table(String, without: Set<String> = [])
        case index(String)
        /// ALTER TABLE … ADD COLUMN from the description.
        case column(String, String)
        /// What a version had that the description no longer holds.
        case sql(String)

        func ddl(_ d: SQLDialect) -> String {
            switch self {
            case .table(let name, let without): return StoreSchema.table(name).ddl(d, without: without)
            case .index(let name): return StoreSchema.index(name).ddl(d)
            case .column(let table, let name):
                guard let c = StoreSchema.table(table).columns.first(where: { $0.name == name }) else {
                    preconditionFailure("no column \(table).\(name)")
                }
                return "ALTER TABLE \(table) ADD COLUMN \(c.ddl(d))"
            case .sql(let sql): return sql
            }
        }
    }

    /// Everything, as a new database gets it; `except` leaves out what the
    /// given (later) steps add, for a migration that made an older version.
    static func createAll(except later: [Step] = []) -> [Step] {
        var columns: [String: Set<String>] = [:]
        var skipped = Set<String>()
        for step in later {
            switch step {
            case .column(let t, let c): columns[t, default: []].insert(c)
            case .index(let i): skipped.insert(i)
            case .table(let t, _): skipped.insert(t)
            case .sql: break
            }
        }
        return tables.filter { !skipped.contains($0.name) }.map { .table($0.name, without: columns[$0.name] ?? []) }
            + indexes.filter { !skipped.contains($0.name) }.map { .index($0.name) }
    }
}
