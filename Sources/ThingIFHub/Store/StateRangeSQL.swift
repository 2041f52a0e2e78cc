// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The range clauses of a state query in SQL, for SQLite and PostgreSQL:
/// StateRange's rule (ThingIFRules' range condition) said over the stored
/// state's JSON. A field that is missing or no number is NULL, and NULL
/// passes no comparison, as the rule matches nothing there; each limit is
/// a bound number.
enum StateRangeSQL {
    /// " AND …" for every limit of every range, and its binds in order;
    /// empty for none.
    static func condition(_ d: SQLDialect, alias: String?, _ ranges: [StateRange]) -> (
        sql: String, binds: [SQLValue]
    ) {
        var sql = ""
        var binds: [SQLValue] = []
        let number = d.stateFieldNumber(aliased: alias != nil)
        for r in ranges {
            let keys = d.stateFieldNumberKeys(alias: alias, field: r.field)
            if let lower = r.lower {
                sql += " AND \(number) \(r.lowerIncluded ? ">=" : ">") \(d.boundNumber)"
                binds += keys + [.text(String(lower))]
            }
            if let upper = r.upper {
                sql += " AND \(number) \(r.upperIncluded ? "<=" : "<") \(d.boundNumber)"
                binds += keys + [.text(String(upper))]
            }
        }
        return (sql, binds)
    }
}
