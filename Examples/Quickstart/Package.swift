// swift-tools-version:6.0
import PackageDescription

// The README's "Using the engine from Swift", built and run by CI (scripts/check-examples).
// Sources/Quickstart/main.swift is the README's Swift block, verbatim. The dependency is this
// checkout, reached through a link named OrderFlow so that the package's identity is
// `OrderFlow` whatever folder the checkout is in.
let package = Package(
    name: "Quickstart",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "Dependencies/OrderFlow")],
    targets: [
        .executableTarget(name: "Quickstart", dependencies: [.product(name: "OrderFlow", package: "OrderFlow")]),
    ],
    swiftLanguageModes: [.v6]
)
