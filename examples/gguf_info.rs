//! Print a GGUF file's metadata (except the vocabulary) and tensor types: `cargo run --release --example gguf_info -- FILE`.
use candle_core::quantized::gguf_file::Content;

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: gguf_info FILE.gguf"))?;
    let content = Content::read(&mut std::fs::File::open(&path)?)?;
    let mut keys: Vec<_> = content.metadata.keys().collect();
    keys.sort();
    for key in keys {
        let value = &content.metadata[key];
        match value.to_vec() {
            Ok(items) => println!("{key} = [{} items]", items.len()),
            Err(_) => println!("{key} = {:.100}", format!("{value:?}")),
        }
    }
    let mut counts = std::collections::BTreeMap::new();
    for (name, info) in &content.tensor_infos {
        *counts.entry(format!("{:?}", info.ggml_dtype)).or_insert(0) += 1;
        if !name.starts_with("blk.") || name.starts_with("blk.0.") {
            println!("{name}: {:?} {:?}", info.ggml_dtype, info.shape.dims());
        }
    }
    println!("tensor types: {counts:?}");
    Ok(())
}
