//! The cache's key and value types and their on-disk encoding for foyer's disk tier.

use std::io::{Read, Write};
use std::sync::Arc;

use bytes::Bytes;
use foyer::{Code, Error as FoyerError, ErrorKind};

/// Longest object key accepted when decoding from the disk tier.
const MAX_KEY_LEN: u32 = 4096;
/// Largest block accepted when decoding from the disk tier.
const MAX_BLOCK_LEN: u64 = 1 << 30;

/// (object key, block size, block index): one cached block.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BlockKey {
    object: Arc<str>,
    block_size: u64,
    index: u64,
}

impl BlockKey {
    pub fn new(object: Arc<str>, block_size: u64, index: u64) -> Self {
        BlockKey {
            object,
            block_size,
            index,
        }
    }

    pub fn index(&self) -> u64 {
        self.index
    }

    /// Memory this key accounts for in the memory tier.
    pub fn weight(&self) -> usize {
        self.object.len() + 2 * std::mem::size_of::<u64>()
    }
}

fn io(e: std::io::Error) -> FoyerError {
    FoyerError::io_error(e)
}

impl Code for BlockKey {
    fn encode(&self, writer: &mut impl Write) -> foyer::Result<()> {
        let object = self.object.as_bytes();
        let len = u32::try_from(object.len())
            .ok()
            .filter(|len| *len <= MAX_KEY_LEN)
            .ok_or_else(|| {
                FoyerError::new(ErrorKind::BufferSizeLimit, "object key too long to cache")
            })?;
        writer.write_all(&len.to_le_bytes()).map_err(io)?;
        writer.write_all(object).map_err(io)?;
        writer
            .write_all(&self.block_size.to_le_bytes())
            .map_err(io)?;
        writer.write_all(&self.index.to_le_bytes()).map_err(io)
    }

    fn decode(reader: &mut impl Read) -> foyer::Result<Self> {
        let mut len = [0u8; 4];
        reader.read_exact(&mut len).map_err(io)?;
        let len = u32::from_le_bytes(len);
        if len > MAX_KEY_LEN {
            return Err(FoyerError::new(
                ErrorKind::Parse,
                "cached object key length out of range",
            ));
        }
        let mut object = vec![0u8; len as usize];
        reader.read_exact(&mut object).map_err(io)?;
        let object = String::from_utf8(object)
            .map_err(|_| FoyerError::new(ErrorKind::Parse, "cached object key is not UTF-8"))?;
        let mut word = [0u8; 8];
        reader.read_exact(&mut word).map_err(io)?;
        let block_size = u64::from_le_bytes(word);
        reader.read_exact(&mut word).map_err(io)?;
        let index = u64::from_le_bytes(word);
        Ok(BlockKey {
            object: Arc::from(object),
            block_size,
            index,
        })
    }

    fn estimated_size(&self) -> usize {
        4 + self.object.len() + 16
    }
}

/// The bytes of one block, exactly as the object store returned them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedBlock(Bytes);

impl CachedBlock {
    pub fn new(bytes: Bytes) -> Self {
        CachedBlock(bytes)
    }

    pub fn bytes(&self) -> &Bytes {
        &self.0
    }

    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl Code for CachedBlock {
    fn encode(&self, writer: &mut impl Write) -> foyer::Result<()> {
        writer
            .write_all(&(self.0.len() as u64).to_le_bytes())
            .map_err(io)?;
        writer.write_all(&self.0).map_err(io)
    }

    fn decode(reader: &mut impl Read) -> foyer::Result<Self> {
        let mut len = [0u8; 8];
        reader.read_exact(&mut len).map_err(io)?;
        let len = u64::from_le_bytes(len);
        if len > MAX_BLOCK_LEN {
            return Err(FoyerError::new(
                ErrorKind::Parse,
                "cached block length out of range",
            ));
        }
        let mut data = vec![0u8; len as usize];
        reader.read_exact(&mut data).map_err(io)?;
        Ok(CachedBlock(Bytes::from(data)))
    }

    fn estimated_size(&self) -> usize {
        8 + self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_blocks_survive_the_disk_encoding() {
        let key = BlockKey::new(Arc::from("p/topics/x/0/a.seg"), 1 << 20, 42);
        let mut buf = Vec::new();
        key.encode(&mut buf).unwrap();
        assert_eq!(buf.len(), key.estimated_size());
        assert_eq!(BlockKey::decode(&mut buf.as_slice()).unwrap(), key);

        let block = CachedBlock::new(Bytes::from_static(b"record batches"));
        let mut buf = Vec::new();
        block.encode(&mut buf).unwrap();
        assert_eq!(buf.len(), block.estimated_size());
        assert_eq!(CachedBlock::decode(&mut buf.as_slice()).unwrap(), block);
    }

    #[test]
    fn corrupt_lengths_are_refused_instead_of_allocated() {
        let mut huge_key = u32::MAX.to_le_bytes().to_vec();
        huge_key.extend_from_slice(&[0; 16]);
        assert!(BlockKey::decode(&mut huge_key.as_slice()).is_err());
        let huge_block = u64::MAX.to_le_bytes();
        assert!(CachedBlock::decode(&mut huge_block.as_slice()).is_err());
        let truncated = 10u64.to_le_bytes();
        assert!(CachedBlock::decode(&mut truncated.as_slice()).is_err());
    }
}
