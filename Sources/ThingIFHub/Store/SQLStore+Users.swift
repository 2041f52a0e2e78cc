// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's users, groups and app installations (the statements SQLite and PostgreSQL share).
extension SQLStore {
    // MARK: users

    public func createUser(loginName: String?, passwordHash: String?) -> UserRecord? {
        use(nil) { c in
            var u = UserRecord(
                userID: HubIDs.userID(), loginName: loginName, passwordHash: passwordHash,
                accessToken: "", createdAt: Platform.epochMs())
            return try c.transaction { () throws -> UserRecord? in
                // A taken loginName (by any hub) inserts nothing.
                guard
                    try c.run(
                        """
                        INSERT INTO users (user_id, login_name, password_hash, created_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT (login_name) DO NOTHING
                        """, [.text(u.userID), .text(loginName), .text(passwordHash), .int(u.createdAt)]) == 1
                else { return nil }
                u.accessToken = try issue(c, kind: .user, subject: u.userID)
                return u
            }
        }
    }

    public func setPasswordHash(userID: String, _ hash: String) -> Bool {
        use(false) {
            try $0.run("UPDATE users SET password_hash = ? WHERE user_id = ?", [.text(hash), .text(userID)]) == 1
        }
    }

    public func user(id: String) -> UserRecord? {
        use(nil) { try $0.first(StoreRows.userColumns + " WHERE user_id = ?", [.text(id)], StoreRows.user) }
    }

    public func user(accessToken: String) -> UserRecord? {
        use(nil) {
            try $0.first(
                StoreRows.userColumns + " WHERE " + Self.isLiveTokenSubject("user_id") + " LIMIT 1",
                Self.tokenValues(.user, accessToken), StoreRows.user)
        }
    }

    /// One statement: the user of the token and, beside it, the thing (its
    /// columns NULL when there is none).
    public func user(accessToken: String, thing thingID: String) -> (user: UserRecord, thing: ThingRecord?)? {
        use(nil) {
            try $0.first(
                Self.hot.userAndThing, Self.tokenValues(.user, accessToken) + [.text(thingID)]
            ) { row in
                let thing = StoreRows.ShiftedRow(row, by: StoreRows.userCount)
                return (StoreRows.user(row), thing.isNull(0) ? nil : StoreRows.thingWithLists(thing))
            }
        }
    }

    public func user(loginName: String) -> UserRecord? {
        use(nil) {
            try $0.first(StoreRows.userColumns + " WHERE login_name = ?", [.text(loginName)], StoreRows.user)
        }
    }

    // MARK: groups

    private static func withMembers(_ c: Connection, _ g: GroupRecord) throws -> GroupRecord {
        var out = g
        out.members = try c.rows(
            "SELECT user_id FROM group_members WHERE group_id = ? ORDER BY position", [.text(g.groupID)]
        ) { $0.string(0) }
        return out
    }

    public func createGroup(name: String, ownerUserID: String, members: [String]) -> GroupRecord? {
        use(nil) { c in
            let g = GroupRecord(groupID: HubIDs.groupID(), name: name, ownerUserID: ownerUserID, members: members)
            return try c.transaction {
                try c.run(
                    "INSERT INTO groups (group_id, name, owner_user_id) VALUES (?, ?, ?)",
                    [.text(g.groupID), .text(name), .text(ownerUserID)])
                for (i, m) in members.enumerated() {
                    try c.run(
                        "INSERT INTO group_members (group_id, position, user_id) VALUES (?, ?, ?)",
                        [.text(g.groupID), .int(Int64(i)), .text(m)])
                }
                return g
            }
        }
    }

    public func group(id: String) -> GroupRecord? {
        use(nil) { c in
            try c.first(StoreRows.groupColumns + " WHERE group_id = ?", [.text(id)], StoreRows.group).map {
                try Self.withMembers(c, $0)
            }
        }
    }

    public func groups(ofUser userID: String) -> [GroupRecord] {
        use([]) { c in
            // Ordered by groupID as MemoryStore does.
            try c.rows(
                StoreRows.groupColumns + """
                     WHERE owner_user_id = ?
                       OR group_id IN (SELECT group_id FROM group_members WHERE user_id = ?)
                    ORDER BY group_id
                    """ + Self.dialect.byteOrder, [.text(userID), .text(userID)], StoreRows.group
            ).map { try Self.withMembers(c, $0) }
        }
    }

    // MARK: app installations

    public func addAppInstallation(userID: String, kind: AppInstallation.Kind, target: String?) -> AppInstallation? {
        use(nil) { c in
            let id = HubIDs.installationID()
            let i = AppInstallation(
                installationID: id, userID: userID, kind: kind,
                target: StoreRules.installationTarget(kind: kind, id: id, given: target), createdAt: Platform.epochMs())
            try c.run(
                """
                INSERT INTO app_installations (installation_id, user_id, kind, target, created_at)
                VALUES (?, ?, ?, ?, ?)
                """, [.text(id), .text(userID), .text(kind.rawValue), .text(i.target), .int(i.createdAt)])
            return i
        }
    }

    public func appInstallation(id: String) -> AppInstallation? {
        use(nil) {
            try $0.first(
                StoreRows.installationColumns + " WHERE installation_id = ?", [.text(id)], StoreRows.installation)
        }
    }

    public func appInstallations(userID: String) -> [AppInstallation] {
        use([]) {
            try $0.rows(
                StoreRows.installationColumns + " WHERE user_id = ? ORDER BY created_at, "
                    + Self.dialect.insertionOrder, [.text(userID)], StoreRows.installation)
        }
    }

    public func notificationInstallations(userID: String, issuingInstallationID: String?) -> [AppInstallation] {
        use([]) {
            try $0.rows(
                StoreRows.installationColumns + " WHERE " + Self.toldInstallations(user: "?", issuing: "?")
                    + " ORDER BY i.created_at, i." + Self.dialect.insertionOrder,
                [.text(userID), .text(issuingInstallationID)], StoreRows.installation)
        }
    }

    /// Which of a user's app installations (`i`) are told of a command it
    /// issued from `issuing`: all of them for a user with a login name, only
    /// the issuing one for a pseudo user. `user` and `issuing` are SQL: a
    /// placeholder, or the columns of a command read in the same statement.
    static func toldInstallations(user: String, issuing: String) -> String {
        "i.user_id = " + user + " AND EXISTS (SELECT 1 FROM users u WHERE u.user_id = i.user_id"
            + " AND (u.login_name IS NOT NULL OR i.installation_id = " + issuing + "))"
    }

    public func countAppInstallations(kind: AppInstallation.Kind) -> Int {
        use(0) {
            Int(
                try $0.first("SELECT COUNT(*) FROM app_installations WHERE kind = ?", [.text(kind.rawValue)]) {
                    $0.int(0)
                } ?? 0)
        }
    }

    public func deleteUser(id: String) -> [AppInstallation]? {
        use(nil) { c in
            try c.transaction { () throws -> [AppInstallation]? in
                guard try c.first(StoreRows.userColumns + " WHERE user_id = ?", [.text(id)], StoreRows.user) != nil
                else { return nil }
                let installations = try c.rows(
                    StoreRows.installationColumns + " WHERE i.user_id = ?", [.text(id)], StoreRows.installation)
                let u: [SQLValue] = [.text(id)]
                try c.run("DELETE FROM app_installations WHERE user_id = ?", u)
                try c.run("DELETE FROM tokens WHERE kind = ? AND subject_id = ?", [.text(TokenKind.user.rawValue)] + u)
                try c.run("DELETE FROM thing_owners WHERE owner = ?", [.text("user:" + id)])
                try c.run("DELETE FROM group_members WHERE user_id = ?", u)
                try c.run("DELETE FROM users WHERE user_id = ?", u)
                return installations
            }
        }
    }

    public func removeAppInstallation(id: String, userID: String) -> Bool {
        use(false) {
            try $0.run(
                "DELETE FROM app_installations WHERE installation_id = ? AND user_id = ?", [.text(id), .text(userID)])
                == 1
        }
    }
}
