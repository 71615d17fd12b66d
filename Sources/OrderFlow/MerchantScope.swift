/// The merchants a worker serves, for pushes and timers alike: every merchant in the database
/// (the default), or a declared set. Two workers with disjoint sets never touch each other's
/// orders; a worker for one set never sends another merchant's pushes with its APNs app.
public enum MerchantScope: Sendable, Hashable {
    case all
    case only(Set<String>)

    /// Whether `merchantID` is served.
    public func contains(_ merchantID: String) -> Bool {
        switch self {
        case .all: return true
        case .only(let merchants): return merchants.contains(merchantID)
        }
    }

    /// The set as a bound `text[]` parameter; nil (SQL NULL) for every merchant, which the
    /// statements read as "no filter".
    var boundMerchantIDs: [String]? {
        switch self {
        case .all: return nil
        case .only(let merchants): return merchants.sorted()
        }
    }
}
