//! KV events on ZMQ PUB in vLLM's wire format, for routers that track which
//! prefixes each replica holds (llm-d's KV-cache indexer, Dynamo's relay,
//! vllm-router's `kv_aware`).
//!
//! Each message has three frames: the topic (`kv@<host>:<port>@<model>`, as
//! llm-d names a pod's stream), the sequence number (8 bytes, big-endian,
//! from 0) and a msgpack `KVEventBatch`: `[ts, [event, ...]]`, each event an
//! array whose first element is its tag, as msgspec encodes vLLM's
//! `array_like`, `tag=True` structs:
//! - `["BlockStored", [hash, ...], parent_hash | nil, [token, ...], block_size, nil, nil]`
//!   (lora id and medium unset);
//! - `["BlockRemoved", [hash, ...], nil]`;
//! - `["AllBlocksCleared"]`.
//!
//! Hashes are the index's chain hashes (`tessera_kv::chain_hash`), unsigned
//! 64-bit integers (vLLM's `ExternalBlockHash` is `bytes | int`). Consecutive
//! stored blocks of one chain share a `BlockStored`, as vLLM sends them. Only
//! full blocks are announced, parents before children; a clear comes first
//! at start and before a restored cache is announced. ZMQ PUB drops what is
//! sent before a subscriber connects, as vLLM's publisher does without its
//! replay socket.

use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};
use tessera_engine::{IndexEvent, KvEventSink};
use zeromq::{Socket, SocketSend, ZmqMessage};

/// Start publishing on `endpoint` (`tcp://127.0.0.1:5557`): binds before it
/// returns, so a bad endpoint is an error at startup. The engine sends its
/// index changes to the returned sink.
pub fn start_kv_events(endpoint: &str, topic: String, block_size: usize) -> Result<KvEventSink, String> {
    let (sink, batches) = tokio::sync::mpsc::unbounded_channel::<Vec<IndexEvent>>();
    let (bound, bind_result) = mpsc::channel::<Result<(), String>>();
    let endpoint = endpoint.to_string();
    std::thread::Builder::new()
        .name("tessera-kv-events".into())
        .spawn(move || publish(&endpoint, topic, block_size, batches, bound))
        .map_err(|error| format!("starting the KV-event thread: {error}"))?;
    bind_result
        .recv()
        .map_err(|_| "the KV-event thread stopped before binding".to_string())??;
    Ok(sink)
}

/// The publisher thread: bind, report, then send each batch until the engine hangs up.
fn publish(
    endpoint: &str,
    topic: String,
    block_size: usize,
    mut batches: tokio::sync::mpsc::UnboundedReceiver<Vec<IndexEvent>>,
    bound: mpsc::Sender<Result<(), String>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = bound.send(Err(format!("starting the KV-event runtime: {error}")));
            return;
        }
    };
    runtime.block_on(async move {
        let mut socket = zeromq::PubSocket::new();
        if let Err(error) = socket.bind(endpoint).await {
            let _ = bound.send(Err(format!("binding --kv-events {endpoint}: {error}")));
            return;
        }
        let _ = bound.send(Ok(()));
        let topic = bytes::Bytes::from(topic.into_bytes());
        let mut sequence: u64 = 0;
        // The engine thread never waits on us: it sends and goes on.
        while let Some(batch) = batches.recv().await {
            let payload = encode_batch(&batch, block_size, unix_seconds());
            let frames = vec![
                topic.clone(),
                bytes::Bytes::copy_from_slice(&sequence.to_be_bytes()),
                bytes::Bytes::from(payload),
            ];
            let Ok(message) = ZmqMessage::try_from(frames) else {
                continue;
            };
            if let Err(error) = socket.send(message).await {
                tracing::warn!(%error, "publishing KV events");
            }
            sequence += 1;
        }
    });
}

fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One `KVEventBatch` in msgpack.
pub fn encode_batch(events: &[IndexEvent], block_size: usize, ts: f64) -> Vec<u8> {
    let grouped = group(events);
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = rmp::encode::write_array_len(&mut out, 2);
    let _ = rmp::encode::write_f64(&mut out, ts);
    let _ = rmp::encode::write_array_len(&mut out, grouped.len() as u32);
    for event in &grouped {
        write_event(&mut out, event, block_size);
    }
    out
}

/// A wire event: runs of stored blocks of one chain are one `BlockStored`.
#[derive(Debug, PartialEq)]
enum WireEvent<'a> {
    Stored {
        hashes: Vec<u64>,
        parent: Option<u64>,
        tokens: Vec<&'a [u32]>,
    },
    Removed(Vec<u64>),
    Cleared,
}

fn group(events: &[IndexEvent]) -> Vec<WireEvent<'_>> {
    let mut out: Vec<WireEvent> = Vec::new();
    for event in events {
        match (event, out.last_mut()) {
            (
                IndexEvent::Stored { hash, parent, tokens },
                Some(WireEvent::Stored {
                    hashes, tokens: all, ..
                }),
            ) if *parent == hashes.last().copied() => {
                hashes.push(*hash);
                all.push(tokens);
            }
            (IndexEvent::Stored { hash, parent, tokens }, _) => out.push(WireEvent::Stored {
                hashes: vec![*hash],
                parent: *parent,
                tokens: vec![tokens],
            }),
            (IndexEvent::Removed { hash }, Some(WireEvent::Removed(hashes))) => hashes.push(*hash),
            (IndexEvent::Removed { hash }, _) => out.push(WireEvent::Removed(vec![*hash])),
            (IndexEvent::Cleared, _) => out.push(WireEvent::Cleared),
        }
    }
    out
}

fn write_event(out: &mut Vec<u8>, event: &WireEvent, block_size: usize) {
    match event {
        WireEvent::Stored { hashes, parent, tokens } => {
            let _ = rmp::encode::write_array_len(out, 7);
            let _ = rmp::encode::write_str(out, "BlockStored");
            write_hashes(out, hashes);
            match parent {
                Some(parent) => drop(rmp::encode::write_uint(out, *parent)),
                None => drop(rmp::encode::write_nil(out)),
            }
            let count: usize = tokens.iter().map(|run| run.len()).sum();
            let _ = rmp::encode::write_array_len(out, count as u32);
            for &token in tokens.iter().flat_map(|run| run.iter()) {
                let _ = rmp::encode::write_uint(out, u64::from(token));
            }
            let _ = rmp::encode::write_uint(out, block_size as u64);
            let _ = rmp::encode::write_nil(out); // lora_id
            let _ = rmp::encode::write_nil(out); // medium
        }
        WireEvent::Removed(hashes) => {
            let _ = rmp::encode::write_array_len(out, 3);
            let _ = rmp::encode::write_str(out, "BlockRemoved");
            write_hashes(out, hashes);
            let _ = rmp::encode::write_nil(out); // medium
        }
        WireEvent::Cleared => {
            let _ = rmp::encode::write_array_len(out, 1);
            let _ = rmp::encode::write_str(out, "AllBlocksCleared");
        }
    }
}

fn write_hashes(out: &mut Vec<u8>, hashes: &[u64]) {
    let _ = rmp::encode::write_array_len(out, hashes.len() as u32);
    for &hash in hashes {
        let _ = rmp::encode::write_uint(out, hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_of_stored_blocks_is_one_event_and_removals_group() {
        let events = vec![
            IndexEvent::Cleared,
            IndexEvent::Stored {
                hash: 1,
                parent: None,
                tokens: vec![10, 11],
            },
            IndexEvent::Stored {
                hash: 2,
                parent: Some(1),
                tokens: vec![12, 13],
            },
            IndexEvent::Stored {
                hash: 3,
                parent: Some(1),
                tokens: vec![14, 15],
            },
            IndexEvent::Removed { hash: 2 },
            IndexEvent::Removed { hash: 3 },
        ];
        let grouped = group(&events);
        assert_eq!(grouped.len(), 4, "{grouped:?}");
        assert_eq!(
            grouped[1],
            WireEvent::Stored {
                hashes: vec![1, 2],
                parent: None,
                tokens: vec![&[10, 11], &[12, 13]]
            }
        );
        assert_eq!(
            grouped[2],
            WireEvent::Stored {
                hashes: vec![3],
                parent: Some(1),
                tokens: vec![&[14, 15]]
            }
        );
        assert_eq!(grouped[3], WireEvent::Removed(vec![2, 3]));
    }

    #[test]
    fn the_batch_is_msgpack_in_vllms_array_layout() {
        let events = vec![
            IndexEvent::Stored {
                hash: 7,
                parent: None,
                tokens: vec![1, 2],
            },
            IndexEvent::Cleared,
        ];
        let bytes = encode_batch(&events, 2, 1.5);
        let mut expected = vec![0x92, 0xcb];
        expected.extend(1.5f64.to_be_bytes());
        expected.push(0x92); // two events
        expected.push(0x97); // BlockStored: tag + 6 fields
        expected.push(0xab);
        expected.extend(b"BlockStored");
        expected.extend([0x91, 0x07, 0xc0, 0x92, 0x01, 0x02, 0x02, 0xc0, 0xc0]);
        expected.push(0x91);
        expected.push(0xb0);
        expected.extend(b"AllBlocksCleared");
        assert_eq!(bytes, expected);
    }
}
