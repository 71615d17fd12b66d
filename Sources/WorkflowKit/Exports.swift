// Workflows render values into the APNs payload format, which `APNSCore` owns together with the
// JSON value type and APNs' size limit; `import WorkflowKit` brings them along.
@_exported import APNSCore
