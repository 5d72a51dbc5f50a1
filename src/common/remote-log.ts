/**
 * A remote log handle: what the coordinator registers of a bucket's remote log (its committed
 * manifest), and what a new leader continues from. The manifest (server/tablet/remote) names the
 * remote segments, which hold the offsets [remoteLogStartOffset, remoteLogEndOffset).
 */
export interface RemoteLogHandle {
  /** Location of the manifest object, under remote.data.dir. */
  manifestPath: string;
  remoteLogStartOffset: bigint;
  /** First offset not in the remote log: the next segment uploaded starts here. */
  remoteLogEndOffset: bigint;
}
