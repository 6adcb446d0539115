//! One event stream, many sinks (STYLE practice 9).

use std::io;

use crate::core::event::{EventRecord, EventSink};

/// Feeds every record to every sink. A failing sink never starves the
/// others: all are fed, and the first error of the call is returned.
#[derive(Default)]
pub struct Fanout {
    pub sinks: Vec<Box<dyn EventSink>>,
}

impl Fanout {
    pub fn new(sinks: Vec<Box<dyn EventSink>>) -> Self {
        Self { sinks }
    }

    pub fn push(&mut self, sink: Box<dyn EventSink>) {
        self.sinks.push(sink);
    }

    fn each(
        &mut self,
        mut call: impl FnMut(&mut dyn EventSink) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut first_error = None;
        for sink in &mut self.sinks {
            if let Err(err) = call(sink.as_mut()) {
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl std::fmt::Debug for Fanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fanout")
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

impl EventSink for Fanout {
    fn event(&mut self, record: &EventRecord) -> io::Result<()> {
        self.each(|sink| sink.event(record))
    }

    fn finish(&mut self) -> io::Result<()> {
        self.each(|sink| sink.finish())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::report::testdata;

    struct Probe {
        name: &'static str,
        fail: bool,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl EventSink for Probe {
        fn event(&mut self, record: &EventRecord) -> io::Result<()> {
            self.log
                .lock()
                .unwrap()
                .push(format!("{} {}", self.name, record.task));
            if self.fail {
                Err(io::Error::other(format!("{} broke", self.name)))
            } else {
                Ok(())
            }
        }

        fn finish(&mut self) -> io::Result<()> {
            self.log
                .lock()
                .unwrap()
                .push(format!("{} finish", self.name));
            if self.fail {
                Err(io::Error::other(format!("{} broke at finish", self.name)))
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn feeds_all_and_returns_the_first_error() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let probe = |name, fail| {
            Box::new(Probe {
                name,
                fail,
                log: Arc::clone(&log),
            }) as Box<dyn EventSink>
        };
        let mut fanout = Fanout::new(vec![probe("a", false), probe("b", true), probe("c", true)]);
        let err = fanout
            .event(&testdata::started("t", "t.yaml", 1))
            .unwrap_err();
        assert_eq!(err.to_string(), "b broke");
        let err = fanout.finish().unwrap_err();
        assert_eq!(err.to_string(), "b broke at finish");
        assert_eq!(
            *log.lock().unwrap(),
            ["a t", "b t", "c t", "a finish", "b finish", "c finish"]
        );
    }
}
