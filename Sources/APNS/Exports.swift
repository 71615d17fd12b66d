// The payload format, the JSON value and APNs' size limit live in `APNSCore`, which the workflow
// renderer uses too without the HTTP client; `import APNS` brings them along.
@_exported import APNSCore
