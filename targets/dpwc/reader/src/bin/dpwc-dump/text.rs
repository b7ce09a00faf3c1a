//! The text form of the dump, for people.

use crate::ReplaySummary;
use dpwc_reader::{Cache, Chunk, Corruption, Entry, Generation};
use std::io::{self, Write};

/// Bytes of data per line of `--data`.
const HEX_LINE: usize = 32;

pub fn write(
    out: &mut impl Write,
    cache: &Cache,
    replay: &ReplaySummary,
    data: bool,
) -> io::Result<()> {
    if cache.device_offset != 0 {
        writeln!(
            out,
            "PM device at byte {} of the image (after the NVDIMM's pfn info block)",
            cache.device_offset
        )?;
    }
    let s = &cache.superblock;
    writeln!(
        out,
        "superblock: version {}, {} generations × {} chunks × {} bytes, origin {} sectors, table at {}, data at {}",
        s.version, s.generations, s.chunks_per_gen, s.chunk_size, s.origin_sectors, s.meta_offset, s.data_offset
    )?;
    for generation in &cache.generations {
        write_generation(out, generation, data)?;
    }
    writeln!(
        out,
        "replay: {} entries in (generation id, entry id) order, {} writes and {} discards; \
         {} sectors written, {} discarded",
        replay.order.len(),
        replay.writes,
        replay.discards,
        replay.written_sectors,
        replay.discarded_sectors
    )?;
    for extent in &replay.extents {
        let what = if extent.discarded {
            "discarded"
        } else {
            "written"
        };
        writeln!(out, "  sectors {}..{} {what}", extent.start, extent.end)?;
    }
    for (gen_id, id) in &replay.duplicate_ids {
        writeln!(out, "  warning: several valid entries carry generation {gen_id} entry {id}; their order is undefined")?;
    }
    Ok(())
}

fn write_generation(out: &mut impl Write, generation: &Generation, data: bool) -> io::Result<()> {
    if generation.damaged_word {
        return writeln!(
            out,
            "generation {}: corrupt id word (CRC): live or not unknown, held, not replayed",
            generation.index
        );
    }
    if !generation.is_live() {
        let used: Vec<_> = generation
            .chunks
            .iter()
            .map(|c| c.used.to_string())
            .collect();
        return writeln!(
            out,
            "generation {}: free, not replayed (used counters {})",
            generation.index,
            used.join(" ")
        );
    }
    let held = if generation.held {
        " (held for its damage: not replayed; drop_damaged frees it)"
    } else {
        ""
    };
    writeln!(
        out,
        "generation {}: id {}{held}",
        generation.index, generation.gen_id
    )?;
    for chunk in &generation.chunks {
        write_chunk(out, chunk, data)?;
    }
    Ok(())
}

fn write_chunk(out: &mut impl Write, chunk: &Chunk, data: bool) -> io::Result<()> {
    writeln!(
        out,
        "  chunk {}: used {}, {} valid entries",
        chunk.index,
        chunk.used,
        chunk.entries.len()
    )?;
    for entry in &chunk.entries {
        write_entry(out, entry, data)?;
    }
    if chunk.damaged_used {
        writeln!(
            out,
            "    corrupt used counter (CRC): the chunk is not replayed"
        )?;
    }
    for corrupt in &chunk.corrupt {
        let id = corrupt
            .header
            .map(|h| format!(" (entry {})", h.id))
            .unwrap_or_default();
        let after = match corrupt.reason {
            Corruption::DataCrc { .. } => "the walk goes on after it",
            _ => "nor anything after it",
        };
        writeln!(
            out,
            "    corrupt at offset {}{id}: {}; not replayed, {after}",
            corrupt.offset, corrupt.reason
        )?;
    }
    Ok(())
}

fn write_entry(out: &mut impl Write, entry: &Entry, data: bool) -> io::Result<()> {
    let h = &entry.header;
    let kind = if h.is_discard() { "discard" } else { "write" };
    writeln!(
        out,
        "    entry {} at offset {}: {kind} sector {} len {} flags {:#x} crcs {:#010x} {:#010x} ok",
        h.id, entry.offset, h.sector, h.len, h.flags, h.hdr_crc, h.data_crc
    )?;
    if data {
        for (i, line) in entry.data.chunks(HEX_LINE).enumerate() {
            writeln!(out, "      {:06x}  {}", i * HEX_LINE, crate::hex(line))?;
        }
    }
    Ok(())
}
