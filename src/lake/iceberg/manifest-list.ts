/**
 * Iceberg v2 manifest lists (spec "Manifest Lists"): an Avro container file (see avro.ts) of
 * `manifest_file` records, one per manifest of a snapshot.
 *
 *   manifest_file                                        (? = optional: union with null, default null)
 *     500 manifest_path string  501 manifest_length long  502 partition_spec_id int
 *     517 content int (0 data, 1 deletes)  515 sequence_number long  516 min_sequence_number long
 *     503 added_snapshot_id long
 *     504 added_files_count int  505 existing_files_count int  506 deleted_files_count int
 *     512 added_rows_count long  513 existing_rows_count long  514 deleted_rows_count long
 *     507 partitions list<508 field_summary>?   -- one per partition field of the manifest's spec
 *     519 key_metadata bytes?
 *   field_summary (record r508)
 *     509 contains_null boolean  518 contains_nan boolean?
 *     510 lower_bound bytes?  511 upper_bound bytes?   -- single-value encoding (spec Appendix D)
 *   header metadata: snapshot-id, parent-snapshot-id ("null" for none), sequence-number,
 *     format-version "2"
 */
import { decodeAvroFile, encodeAvroFile, fromAvroBytes, listOf, optionalField, requiredField, toAvroBytes } from './avro.js';
import type { ManifestContent, ManifestFile } from './data-file.js';

export interface ManifestList {
  snapshotId: bigint;
  parentSnapshotId: bigint | null;
  sequenceNumber: bigint;
  manifests: ManifestFile[];
}

/** The Avro form of a manifest list entry, as written and as read back. */
interface AvroManifestFile {
  manifest_path: string;
  manifest_length: bigint | number;
  partition_spec_id: number;
  content: number;
  sequence_number: bigint;
  min_sequence_number: bigint;
  added_snapshot_id: bigint;
  added_files_count: number;
  existing_files_count: number;
  deleted_files_count: number;
  added_rows_count: bigint;
  existing_rows_count: bigint;
  deleted_rows_count: bigint;
  partitions: AvroFieldSummary[] | null;
  key_metadata: Buffer | null;
}

interface AvroFieldSummary {
  contains_null: boolean;
  contains_nan: boolean | null;
  lower_bound: Buffer | null;
  upper_bound: Buffer | null;
}

const SCHEMA = {
  type: 'record',
  name: 'manifest_file',
  fields: [
    requiredField('manifest_path', 500, 'string'),
    requiredField('manifest_length', 501, 'long'),
    requiredField('partition_spec_id', 502, 'int'),
    requiredField('content', 517, 'int'),
    requiredField('sequence_number', 515, 'long'),
    requiredField('min_sequence_number', 516, 'long'),
    requiredField('added_snapshot_id', 503, 'long'),
    requiredField('added_files_count', 504, 'int'),
    requiredField('existing_files_count', 505, 'int'),
    requiredField('deleted_files_count', 506, 'int'),
    requiredField('added_rows_count', 512, 'long'),
    requiredField('existing_rows_count', 513, 'long'),
    requiredField('deleted_rows_count', 514, 'long'),
    optionalField(
      'partitions',
      507,
      listOf(508, {
        type: 'record',
        name: 'r508',
        fields: [
          requiredField('contains_null', 509, 'boolean'),
          optionalField('contains_nan', 518, 'boolean'),
          optionalField('lower_bound', 510, 'bytes'),
          optionalField('upper_bound', 511, 'bytes'),
        ],
      }),
    ),
    optionalField('key_metadata', 519, 'bytes'),
  ],
};

export async function encodeManifestList(m: ManifestList): Promise<Uint8Array> {
  return encodeAvroFile({
    schema: SCHEMA,
    metadata: {
      'snapshot-id': String(m.snapshotId),
      'parent-snapshot-id': m.parentSnapshotId === null ? 'null' : String(m.parentSnapshotId),
      'sequence-number': String(m.sequenceNumber),
      'format-version': '2',
    },
    records: m.manifests.map(
      (f): AvroManifestFile => ({
        manifest_path: f.manifestPath,
        manifest_length: f.manifestLength,
        partition_spec_id: f.partitionSpecId,
        content: f.content,
        sequence_number: f.sequenceNumber,
        min_sequence_number: f.minSequenceNumber,
        added_snapshot_id: f.addedSnapshotId,
        added_files_count: f.addedFilesCount,
        existing_files_count: f.existingFilesCount,
        deleted_files_count: f.deletedFilesCount,
        added_rows_count: f.addedRowsCount,
        existing_rows_count: f.existingRowsCount,
        deleted_rows_count: f.deletedRowsCount,
        partitions:
          f.partitions?.map((s) => ({
            contains_null: s.containsNull,
            contains_nan: s.containsNan ?? null,
            lower_bound: s.lowerBound ? toAvroBytes(s.lowerBound) : null,
            upper_bound: s.upperBound ? toAvroBytes(s.upperBound) : null,
          })) ?? null,
        key_metadata: null,
      }),
    ),
  });
}

export async function decodeManifestList(bytes: Uint8Array): Promise<ManifestFile[]> {
  const file = await decodeAvroFile(bytes);
  return Array.from(file.records as Iterable<AvroManifestFile>, (r) => {
    const f: ManifestFile = {
      manifestPath: r.manifest_path,
      manifestLength: Number(r.manifest_length),
      partitionSpecId: r.partition_spec_id,
      content: r.content as ManifestContent,
      sequenceNumber: r.sequence_number,
      minSequenceNumber: r.min_sequence_number,
      addedSnapshotId: r.added_snapshot_id,
      addedFilesCount: r.added_files_count,
      existingFilesCount: r.existing_files_count,
      deletedFilesCount: r.deleted_files_count,
      addedRowsCount: r.added_rows_count,
      existingRowsCount: r.existing_rows_count,
      deletedRowsCount: r.deleted_rows_count,
    };
    if (r.partitions != null) {
      f.partitions = r.partitions.map((s) => {
        const summary: NonNullable<ManifestFile['partitions']>[number] = { containsNull: s.contains_null };
        if (s.contains_nan != null) summary.containsNan = s.contains_nan;
        if (s.lower_bound != null) summary.lowerBound = fromAvroBytes(s.lower_bound);
        if (s.upper_bound != null) summary.upperBound = fromAvroBytes(s.upper_bound);
        return summary;
      });
    }
    return f;
  });
}
