// swift-tools-version:6.1
import PackageDescription

// Modules by concern, layered bottom-up (docs/architecture.md draws them):
//   Timestamps (the one ISO-8601 reading) · APNSCore (the APNs payload format, the one JSON
//     value type, APNs' size limit; no networking)
//   CLibPQ (system library) → PGKit (safe PostgreSQL, knows nothing of orders)
//   WorkflowKit (workflow format, validation, templates; renders into APNSCore's format)
//   HTTP2Push (a pooled, frame-level HTTP/2 client for many small POSTs to one host over TLS;
//     knows no push service: it returns status, headers and body, and each client interprets)
//   APNS (Apple Push Notification service client over APNSCore and HTTP2Push; knows nothing of
//     workflows)
//   FCM (Firebase Cloud Messaging HTTP v1 client over APNSCore's JSON and HTTP2Push; knows
//     nothing of workflows, nor of APNS)
//   OrderFlow (the engine, its SQL in Store/, the worker, OrderFlowHost: the running system
//     as one Service; a DocC catalog)
//   OrderFlowHTTP (the HTTP API from openapi/orderflow.yaml, on Hummingbird: translates, calls)
//   ConsoleOutput (text for people) · CommandLineSupport (what the command-line programs share:
//     the database they choose, exit codes, failure reports)
//   → orderflow (the CLI: arguments in, library calls out; no SQL, no libpq)
// Never on a production path: LocalAPNS (an APNs stand-in), LocalFCM (an FCM stand-in), LocalPostgres (the embedded
// default, used by the CLI to start it), PostgresTesting and OrderFlowTesting (fixtures),
// TestTags (the Swift Testing tags of the groups scripts/test runs apart), and
// OrderFlowDemo → orderflow-demo (the demo, on the public API; it runs the APNs stand-in, so it
// is a program of its own and `orderflow` does not link LocalAPNS).
let package = Package(
    name: "OrderFlow",
    // iOS: only OrderFlowKit is meant for it (the customer's app).
    platforms: [.macOS(.v15), .iOS("16.2")],
    products: [
        .library(name: "OrderFlow", targets: ["OrderFlow"]),
        .library(name: "PGKit", targets: ["PGKit"]),
        .library(name: "APNS", targets: ["APNS"]),
        .library(name: "FCM", targets: ["FCM"]),
        .library(name: "WorkflowKit", targets: ["WorkflowKit"]),
        .library(name: "OrderFlowTesting", targets: ["OrderFlowTesting"]),
        // The customer's iPhone app's half (docs/ios-app.md): Foundation and ActivityKit only.
        .library(name: "OrderFlowKit", targets: ["OrderFlowKit"]),
        .executable(name: "orderflow", targets: ["orderflow"]),
        .executable(name: "orderflow-demo", targets: ["orderflow-demo"]),
        .executable(name: "orderflow-bench", targets: ["orderflow-bench"]),
    ],
    // `Server` (on by default): everything but OrderFlowKit. An app that wants only the kit adds
    // the package with `traits: []`, and SwiftPM then fetches none of the packages below
    // (docs/ios-app.md; scripts/check-kit-package proves it).
    traits: [
        .trait(name: "Server", description: "The engine, the HTTP API, the worker, the CLI and their tests, with the server packages they need."),
        .default(enabledTraits: ["Server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.24.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.36.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.30.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.10.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        // The HTTP API: Hummingbird, and the code swift-openapi-generator made from the contract
        // (committed; scripts/generate-openapi makes it again).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.20.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.8.0"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.3.0"),
        // `swift package generate-documentation --target OrderFlow` (the DocC catalog).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.4.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        // The one ISO-8601 reading and the proleptic Gregorian arithmetic (PGKit, WorkflowKit).
        .target(name: "Timestamps"),
        .target(
            name: "PGKit",
            dependencies: [
                "CLibPQ",
                "Timestamps",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "LocalPostgres",
            dependencies: [
                "PGKit",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The APNs payload format, the one JSON value type and APNs' size limit: no networking,
        // so that WorkflowKit renders into the format APNS sends.
        .target(name: "APNSCore"),
        .target(
            name: "WorkflowKit",
            dependencies: [
                "APNSCore",
                "Timestamps",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Mustache", package: "swift-mustache"),
            ]
        ),
        // The push clients' transport: HTTP/2 on swift-nio-http2's frames, pooled connections to
        // one host over TLS, for many small POSTs; and the network policy both clients keep
        // (TLS, and AsyncHTTPClient's settings for their rare other requests). Knows neither
        // APNs nor FCM.
        .target(
            name: "HTTP2Push",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .target(
            name: "APNS",
            dependencies: [
                "APNSCore",
                "HTTP2Push",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // FCM HTTP v1: service-account keys, OAuth 2 access tokens (RS256 JWT bearer grant), data
        // messages. Beside APNS, not on it: it shares APNSCore's JSON value and token masking, and
        // HTTP2Push's transport.
        .target(
            name: "FCM",
            dependencies: [
                "APNSCore",
                "HTTP2Push",
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .target(
            name: "OrderFlow",
            dependencies: [
                "PGKit",
                "WorkflowKit",
                "APNS",
                "APNSCore",
                // The worker's Android side: FCM HTTP v1 through the merchants' service accounts.
                "FCM",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.copy("Migrations")]
        ),
        .target(
            name: "OrderFlowHTTP",
            dependencies: [
                "OrderFlow",
                "PGKit",
                "WorkflowKit",
                "Timestamps",
                "APNSCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["Generated/contract.sha256"],
            resources: [.copy("Resources/openapi.yaml"), .copy("Resources/board")]
        ),
        .target(
            name: "PostgresTesting",
            dependencies: ["PGKit", "LocalPostgres", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "LocalAPNS",
            dependencies: [
                "APNSCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        // The FCM stand-in: the OAuth token endpoint and messages:send over TLS (HTTP/2 or
        // HTTP/1.1), with LocalAPNS's throw-away certificates.
        .target(
            name: "LocalFCM",
            dependencies: [
                "APNSCore",
                "LocalAPNS",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ]
        ),
        .target(
            name: "OrderFlowTesting",
            dependencies: [
                "OrderFlow",
                "PostgresTesting",
                "PGKit",
                "APNS",
                "LocalAPNS",
                "LocalPostgres",
                "WorkflowKit",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "TestTags"),
        // The app's half: no dependency, so that an app adds it with one line.
        .target(name: "OrderFlowKit"),
        .target(
            name: "ConsoleOutput",
            dependencies: ["APNSCore", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "CommandLineSupport",
            dependencies: [
                "OrderFlow",
                "OrderFlowHTTP",
                "LocalPostgres",
                "ConsoleOutput",
                "WorkflowKit",
                "APNSCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "OrderFlowDemo",
            dependencies: [
                "OrderFlow",
                "WorkflowKit",
                "APNS",
                "LocalAPNS",
                "LocalFCM",
                "ConsoleOutput",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "orderflow",
            dependencies: [
                "OrderFlow",
                "OrderFlowHTTP",
                "LocalPostgres",
                "ConsoleOutput",
                "CommandLineSupport",
                "APNS",
                "FCM",
                "WorkflowKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "orderflow-demo",
            dependencies: [
                "OrderFlowDemo",
                "CommandLineSupport",
                "OrderFlow",
                "OrderFlowHTTP",
                "LocalPostgres",
                "ConsoleOutput",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "orderflow-bench",
            dependencies: [
                "OrderFlow",
                "OrderFlowTesting",
                "LocalAPNS",
                "LocalFCM",
                "LocalPostgres",
                "APNS",
                "FCM",
                "PGKit",
                "WorkflowKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        .testTarget(name: "PGKitTests", dependencies: ["PGKit", "PostgresTesting", "LocalPostgres", "TestTags", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "WorkflowKitTests", dependencies: ["WorkflowKit"]),
        .testTarget(name: "TimestampsTests", dependencies: ["Timestamps"]),
        .testTarget(name: "APNSTests", dependencies: [
            "APNS", "APNSCore", "LocalAPNS", "OrderFlowTesting", "TestTags",
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(name: "FCMTests", dependencies: [
            "FCM", "LocalFCM", "APNSCore", "HTTP2Push",
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
            // Raw requests to the stand-in, for the message formats the client never sends.
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(
            name: "OrderFlowTests",
            dependencies: [
                "OrderFlow", "OrderFlowTesting", "LocalAPNS", "PGKit", "LocalPostgres", "APNS", "PostgresTesting", "WorkflowKit", "TestTags",
                // The worker's Android delivery, against the FCM stand-in (Tests/OrderFlowTests/Android).
                "FCM", "LocalFCM",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(
            name: "CLITests",
            dependencies: [
                "OrderFlowTesting", "LocalAPNS", "LocalFCM", "OrderFlow", "PGKit", "PostgresTesting", "WorkflowKit", "APNS", "TestTags",
                // The app's half, against `orderflow serve` (Tests/CLITests/AppKit).
                "OrderFlowKit",
                .product(name: "Crypto", package: "swift-crypto"),
                // The soak's clients call `orderflow serve` over HTTP.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "TextOutputTests", dependencies: [
            "ConsoleOutput", "OrderFlowDemo", "OrderFlowTesting", "OrderFlow", "LocalAPNS", "APNSCore",
            .product(name: "Logging", package: "swift-log"),
        ]),
        .testTarget(
            name: "OrderFlowHTTPTests",
            dependencies: [
                "OrderFlowHTTP", "OrderFlow", "OrderFlowTesting", "PGKit", "WorkflowKit",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// ActivityKit exists only on Apple platforms. On Linux (CI), a stub of the part of its API that
// OrderFlowKit and the generated attributes types use (Tests/Stubs/ActivityKit, from Apple's
// documentation) lets CI type-check the ActivityKit adapter (OrderFlowKitActivityKitCheck compiles
// Sources/OrderFlowKit/ActivityKitSource.swift against it) and decode the engine's payloads with
// the generated types (OrderFlowKitTests). No product depends on the stub, and an app's build
// (on macOS) never sees these targets.
#if os(Linux)
package.targets += [
    .target(name: "ActivityKit", path: "Tests/Stubs/ActivityKit"),
    .target(
        name: "OrderFlowKitActivityKitCheck",
        dependencies: ["OrderFlowKit", "ActivityKit"],
        path: "Tests/Stubs/ActivityKitCheck",
        swiftSettings: [.define("ORDERFLOWKIT_ACTIVITYKIT_STUB")]
    ),
    .testTarget(name: "OrderFlowKitTests", dependencies: ["OrderFlowKit", "ActivityKit", "WorkflowKit", "TestTags"]),
]
#endif

// Every package product is the server's: it is needed only with the `Server` trait. SwiftPM
// fetches a dependency only when a target's enabled dependencies name it, so an app that adds
// the package with `traits: []` for OrderFlowKit (which needs no package) resolves this package
// alone. Conditioning here, rather than on each of the products above, keeps the declarations
// readable and no product can be forgotten.
for target in package.targets {
    target.dependencies = target.dependencies.map { dependency in
        guard case let .productItem(name, packageName, moduleAliases, nil) = dependency else { return dependency }
        return .product(name: name, package: packageName ?? name, moduleAliases: moduleAliases, condition: .when(traits: ["Server"]))
    }
}
