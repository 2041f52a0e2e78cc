// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's users, groups and app installations.
extension MemoryStore {
    // MARK: users, groups, app installations

    public func createUser(loginName: String?, passwordHash: String?) -> UserRecord? {
        data.withLock { d in
            if let loginName, d.usersByLogin[loginName] != nil { return nil }
            var u = UserRecord(
                userID: HubIDs.userID(), loginName: loginName, passwordHash: passwordHash,
                accessToken: "", createdAt: Platform.epochMs())
            d.users[u.userID] = u
            if let loginName { d.usersByLogin[loginName] = u.userID }
            u.accessToken = issue(&d, kind: .user, subjectID: u.userID)
            return u
        }
    }

    public func user(id: String) -> UserRecord? { data.withLock { $0.users[id] } }
    public func user(accessToken: String) -> UserRecord? {
        data.withLock { d in subject(d, kind: .user, token: accessToken).flatMap { d.users[$0] } }
    }
    public func user(loginName: String) -> UserRecord? {
        data.withLock { d in d.usersByLogin[loginName].flatMap { d.users[$0] } }
    }

    public func setPasswordHash(userID: String, _ hash: String) -> Bool {
        data.withLock { d in
            guard d.users[userID] != nil else { return false }
            d.users[userID]!.passwordHash = hash
            return true
        }
    }

    public func createGroup(name: String, ownerUserID: String, members: [String]) -> GroupRecord? {
        data.withLock { d in
            let g = GroupRecord(groupID: HubIDs.groupID(), name: name, ownerUserID: ownerUserID, members: members)
            d.groups[g.groupID] = g
            return g
        }
    }

    public func group(id: String) -> GroupRecord? { data.withLock { $0.groups[id] } }

    public func groups(ofUser userID: String) -> [GroupRecord] {
        data.withLock { d in
            d.groups.values.filter { $0.ownerUserID == userID || $0.members.contains(userID) }
                .sorted { $0.groupID < $1.groupID }
        }
    }

    public func addAppInstallation(userID: String, kind: AppInstallation.Kind, target: String?) -> AppInstallation? {
        data.withLock { d in
            let id = HubIDs.installationID()
            let i = AppInstallation(
                installationID: id, userID: userID, kind: kind,
                target: StoreRules.installationTarget(kind: kind, id: id, given: target),
                createdAt: Platform.epochMs())
            d.installations[id] = i
            d.installationsAdded += 1
            d.installationRank[id] = d.installationsAdded
            return i
        }
    }

    public func appInstallation(id: String) -> AppInstallation? { data.withLock { $0.installations[id] } }

    public func appInstallations(userID: String) -> [AppInstallation] {
        data.withLock { d in
            d.installations.values.filter { $0.userID == userID }.sorted {
                ($0.createdAt, d.installationRank[$0.installationID] ?? 0)
                    < ($1.createdAt, d.installationRank[$1.installationID] ?? 0)
            }
        }
    }

    public func notificationInstallations(userID: String, issuingInstallationID: String?) -> [AppInstallation] {
        guard let u = user(id: userID) else { return [] }
        let all = appInstallations(userID: userID)
        return u.pseudo ? all.filter { $0.installationID == issuingInstallationID } : all
    }

    public func countAppInstallations(kind: AppInstallation.Kind) -> Int {
        data.withLock { d in d.installations.values.filter { $0.kind == kind }.count }
    }

    public func deleteUser(id: String) -> [AppInstallation]? {
        data.withLock { d in
            guard let u = d.users.removeValue(forKey: id) else { return nil }
            if let l = u.loginName, d.usersByLogin[l] == id { d.usersByLogin[l] = nil }
            let mine = d.installations.values.filter { $0.userID == id }
                .sorted { (d.installationRank[$0.installationID] ?? 0) < (d.installationRank[$1.installationID] ?? 0) }
            for i in mine {
                d.installations[i.installationID] = nil
                d.installationRank[i.installationID] = nil
            }
            d.tokens = d.tokens.filter { !($0.value.kind == .user && $0.value.subjectID == id) }
            for (tid, t) in d.things where t.owners.contains("user:" + id) {
                d.things[tid]!.owners.removeAll { $0 == "user:" + id }
            }
            for (gid, g) in d.groups where g.members.contains(id) {
                d.groups[gid]!.members.removeAll { $0 == id }
            }
            return mine
        }
    }

    public func removeAppInstallation(id: String, userID: String) -> Bool {
        data.withLock { d in
            guard d.installations[id]?.userID == userID else { return false }
            d.installations[id] = nil
            d.installationRank[id] = nil
            return true
        }
    }
}
