//! L2 report: `EventSink`s that turn the event stream into outputs.
