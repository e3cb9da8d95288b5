//! The call's parent span: `params._meta.traceparent`/`tracestate` (the MCP trace context
//! convention, SEP-414, read by the request inspector as the body streams past), else the
//! agent's `traceparent`/`tracestate` headers, else none (the call's trace starts here). Both
//! are read with the SDK's W3C Trace Context propagator; an invalid value counts as absent.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// A `traceparent` and its `tracestate`, from one place.
#[derive(Clone, Copy, Debug)]
pub(super) struct Carrier<'a> {
    pub traceparent: Option<&'a str>,
    pub tracestate: Option<&'a str>,
}

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => self.traceparent,
            "tracestate" => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

/// The parent context from the first carrier that holds a valid `traceparent`.
pub(super) fn parent(carriers: [Carrier<'_>; 2]) -> Option<Context> {
    let propagator = TraceContextPropagator::new();
    carriers
        .into_iter()
        .filter(|c| c.traceparent.is_some())
        .map(|c| propagator.extract(&c))
        .find(|cx| cx.span().span_context().is_valid())
}

/// The parent's span context (invalid when there is none).
pub(super) fn span_context(parent: Option<&Context>) -> SpanContext {
    parent.map_or_else(SpanContext::empty_context, |cx| {
        cx.span().span_context().clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn carrier(traceparent: Option<&str>) -> Carrier<'_> {
        Carrier {
            traceparent,
            tracestate: Some("vendor=x"),
        }
    }

    #[test]
    fn meta_wins_then_the_header_then_none() {
        let header = "00-11111111111111111111111111111111-2222222222222222-00";
        let cx = parent([carrier(Some(PARENT)), carrier(Some(header))]).unwrap();
        let sc = span_context(Some(&cx));
        assert_eq!(
            sc.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert!(sc.is_sampled() && sc.is_remote());
        assert_eq!(sc.trace_state().header(), "vendor=x");

        let cx = parent([carrier(None), carrier(Some(header))]).unwrap();
        assert!(!span_context(Some(&cx)).is_sampled());
        assert!(parent([carrier(None), carrier(None)]).is_none());
    }

    #[test]
    fn an_invalid_traceparent_counts_as_absent() {
        for bad in [
            "",
            "00-xyz",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        ] {
            let cx = parent([carrier(Some(bad)), carrier(Some(PARENT))]).unwrap();
            assert_eq!(
                span_context(Some(&cx)).span_id().to_string(),
                "b7ad6b7169203331"
            );
        }
    }
}
