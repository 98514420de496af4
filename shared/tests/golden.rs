//! The verifiable draw's golden vectors (docs/drop-day.md, *A draw anyone
//! can verify*): the permutation, salts, leaves, Merkle root and proofs
//! and the draw's key, as `golden/draw_vectors.json` pins them, which
//! `golden/draw_vectors.py` (an independent implementation with Python's
//! hashlib and hmac, written from the docs) prints. The test runs the
//! script too, so the pinned file cannot drift from it.

// A test file: a vector that cannot be computed is a failure.
#![allow(clippy::unwrap_used)]

use queuegate_shared::draw::DrawPermutation;
use queuegate_shared::draw_proof::{
    commitment, draw_key, leaf, leaf_node, proof, root, salt, DrawRecord, Receipt, PAGE_SIZE,
    VERSION,
};
use serde_json::{json, Value};

fn rust_vectors() -> Value {
    let seed: [u8; 32] = std::array::from_fn(|i| i as u8);
    let salt_key: [u8; 32] = std::array::from_fn(|i| i as u8 + 32);
    let rounds = [5u64, 0, 3, 1];
    let uids: Vec<String> = (0..9).map(|i| format!("v{i:02}")).collect();
    let leaves: Vec<_> = uids.iter().map(|u| leaf(&salt(&salt_key, u), u)).collect();
    let round_of: Vec<u64> = rounds
        .iter()
        .enumerate()
        .flat_map(|(r, &n)| std::iter::repeat_n(r as u64 + 1, n as usize))
        .collect();
    let nodes: Vec<_> = round_of
        .iter()
        .zip(&leaves)
        .map(|(&r, l)| leaf_node(r, l))
        .collect();
    let rt = root(&nodes);
    let key = draw_key(&seed, &rt, &[]);
    let p = DrawPermutation::new(&key);
    let places: Vec<u64> = (0..9)
        .map(|i| {
            let (r, k) = queuegate_shared::draw::slot_of_rank(&rounds, i).unwrap();
            p.place(&rounds, r, k).unwrap()
        })
        .collect();
    let s = DrawPermutation::new(&seed);
    let proofs: serde_json::Map<String, Value> = [0usize, 4, 8]
        .iter()
        .map(|&i| {
            let hexes: Vec<String> = proof(&nodes, i).iter().map(hex::encode).collect();
            (i.to_string(), json!(hexes))
        })
        .collect();
    json!({
        "commitment": hex::encode(commitment(&seed)),
        "salts": uids[..2].iter().map(|u| hex::encode(salt(&salt_key, u))).collect::<Vec<_>>(),
        "leaves": leaves.iter().map(hex::encode).collect::<Vec<_>>(),
        "root": hex::encode(rt),
        "proofs": proofs,
        "drawKey": hex::encode(key),
        "drawKeyWithBeacon": hex::encode(draw_key(&seed, &rt, &[0xab; 32])),
        "places": places,
        "permutation20": (0..20).map(|i| s.within(1, 20, i)).collect::<Vec<_>>(),
        "permutation1M": (0..5).map(|i| s.within(1, 1_000_000, i)).collect::<Vec<_>>(),
    })
}

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

#[test]
fn the_rust_draw_gives_the_pinned_vectors() {
    let pinned: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("draw_vectors.json")).unwrap())
            .unwrap();
    assert_eq!(rust_vectors(), pinned);
}

#[test]
fn the_python_implementation_gives_the_pinned_vectors() {
    let out = std::process::Command::new("python3")
        .arg(dir().join("draw_vectors.py"))
        .output()
        .expect("python3 runs the independent implementation");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let python: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(python, rust_vectors());
}

/// A record and receipt built from the vectors pass the checks, and each
/// change a cheat would make fails one.
#[test]
fn a_record_and_a_receipt_check_and_a_changed_one_does_not() {
    let v = rust_vectors();
    let seed: [u8; 32] = std::array::from_fn(|i| i as u8);
    let text = |k: &str| v[k].as_str().unwrap().to_string();
    let record = DrawRecord {
        version: VERSION,
        queue: "main".into(),
        draw: 1,
        commitment: text("commitment"),
        committed_at: 1_000,
        opens_at: Some(2_000),
        seed: hex::encode(seed),
        beacon: None,
        registrants: 9,
        rounds: vec![5, 0, 3, 1],
        root: text("root"),
        draw_key: text("drawKey"),
        ticket_base: 100,
        page_size: PAGE_SIZE,
        pages: 1,
        leaves: "/queue/draw?queue=main&draw=1&page={page}".into(),
    };
    let leaves: Vec<[u8; 32]> = v["leaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            hex::decode(l.as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap()
        })
        .collect();
    let places = record.check(&leaves).unwrap();
    assert_eq!(json!(places), v["places"]);
    let receipt = Receipt {
        queue: "main".into(),
        draw: 1,
        visitor: "v04".into(),
        salt: hex::encode(salt(&std::array::from_fn(|i| i as u8 + 32), "v04")),
        leaf: v["leaves"][4].as_str().unwrap().into(),
        index: 4,
        round: 1,
        proof: serde_json::from_value(v["proofs"]["4"].clone()).unwrap(),
        root: text("root"),
        place: places[4] + 1,
    };
    record.check_receipt(&receipt).unwrap();
    assert_eq!(record.index_at(places[4]).unwrap(), Some(4));

    let mut other_place = receipt.clone();
    other_place.place = places[4] % 5 + 2;
    assert!(record.check_receipt(&other_place).is_err());
    let mut other_visitor = receipt.clone();
    other_visitor.visitor = "v05".into();
    assert!(record.check_receipt(&other_visitor).is_err());
    let mut other_seed = record.clone();
    other_seed.seed = hex::encode([7u8; 32]);
    assert!(other_seed.check(&leaves).is_err());
    let mut late = record.clone();
    late.committed_at = 3_000;
    assert!(late.check(&leaves).is_err());
    let mut swapped = leaves.clone();
    swapped.swap(0, 1);
    assert!(record.check(&swapped).is_err());
}
