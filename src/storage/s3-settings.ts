/**
 * How to reach S3: the `s3.*` options, else the standard AWS environment variables, else the SDK's
 * own defaults (its credential chain and region). The credentials are kept out of every string
 * this module makes (`describeS3Settings`, `redactSecrets`): they never reach a log line, an
 * error, a metric or an option listing.
 *
 *   option                 environment
 *   s3.endpoint            AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL
 *   s3.region              AWS_REGION, AWS_DEFAULT_REGION          (default us-east-1)
 *   s3.access-key          AWS_ACCESS_KEY_ID
 *   s3.secret-key          AWS_SECRET_ACCESS_KEY   (+ AWS_SESSION_TOKEN)
 *   s3.path-style-access   AWS_S3_FORCE_PATH_STYLE                 (default: true when an endpoint is set)
 */
import { type Options, parseDuration, parseMemory } from '../common/config.js';
import { TributaryError } from '../common/errors.js';

export interface S3Settings {
  endpoint?: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  sessionToken?: string;
  pathStyle: boolean;
  /** Requests in flight at once, per store. */
  maxConnections: number;
  /** Tries of one request (the SDK's standard retries: exponential back-off with jitter). */
  maxAttempts: number;
  /** Size of the parts of a multipart upload. */
  partSize: number;
  /** Objects of this size and larger go up as multipart uploads, smaller ones in one request. */
  multipartThreshold: number;
  /** A commit claim older than this is taken for one whose writer died. */
  commitClaimTimeoutMs: number;
}

/** The declared defaults (common/config.ts), for a process without options (a client). */
const DEFAULTS = { maxConnections: 32, maxAttempts: 5, partSize: 8 << 20, multipartThreshold: 128 << 20, commitClaimTimeoutMs: 60_000 };
/** S3's least part size (but the last part's) and its largest object in one PutObject. */
const MIN_PART_SIZE = 5 << 20;
const MAX_SINGLE_UPLOAD = 5 * 1024 ** 3;

/** The settings of these options (server scope), else of the environment. */
export function s3SettingsOf(options: Options | undefined, env: NodeJS.ProcessEnv = process.env): S3Settings {
  const opt = (key: string): string | undefined => (options?.has(key) ? options.string(key) : undefined);
  const endpoint = opt('s3.endpoint') ?? env.AWS_ENDPOINT_URL_S3 ?? env.AWS_ENDPOINT_URL;
  const pathStyle = opt('s3.path-style-access') ?? env.AWS_S3_FORCE_PATH_STYLE;
  const accessKeyId = opt('s3.access-key') ?? env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = opt('s3.secret-key') ?? env.AWS_SECRET_ACCESS_KEY;
  const sessionToken = opt('s3.access-key') === undefined ? env.AWS_SESSION_TOKEN : undefined;
  const partSize = options ? parseMemory(options.string('s3.multipart.part-size')!)! : DEFAULTS.partSize;
  if (partSize < MIN_PART_SIZE) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `s3.multipart.part-size must be at least 5mb, S3's least part size`);
  const multipartThreshold = options ? parseMemory(options.string('s3.multipart.threshold')!)! : DEFAULTS.multipartThreshold;
  if (multipartThreshold < partSize) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `s3.multipart.threshold (${multipartThreshold} bytes) must be at least s3.multipart.part-size (${partSize} bytes)`);
  if (multipartThreshold > MAX_SINGLE_UPLOAD) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `s3.multipart.threshold must be at most 5gb, S3's largest object in one PutObject`);
  return {
    ...(endpoint ? { endpoint } : {}),
    region: opt('s3.region') ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1',
    ...(accessKeyId ? { accessKeyId } : {}),
    ...(secretAccessKey ? { secretAccessKey } : {}),
    ...(sessionToken ? { sessionToken } : {}),
    pathStyle: pathStyle === undefined ? endpoint !== undefined : pathStyle.trim().toLowerCase() === 'true',
    maxConnections: options ? options.int('s3.max-connections') : DEFAULTS.maxConnections,
    maxAttempts: options ? options.int('s3.max-attempts') : DEFAULTS.maxAttempts,
    partSize,
    multipartThreshold,
    commitClaimTimeoutMs: options ? parseDuration(options.string('s3.commit.claim-timeout')!)! : DEFAULTS.commitClaimTimeoutMs,
  };
}

/** The settings as a log line or status may show them: no credentials, only whether they are set. */
export function describeS3Settings(s: S3Settings): Record<string, string | boolean> {
  return { ...(s.endpoint ? { endpoint: s.endpoint } : {}), region: s.region, pathStyle: s.pathStyle, credentials: s.accessKeyId ? 'static' : 'default chain' };
}

/** `text` with the settings' secrets (and the access key id) replaced. */
export function redactSecrets(text: string, s: S3Settings): string {
  let out = text;
  for (const secret of [s.secretAccessKey, s.sessionToken, s.accessKeyId]) if (secret) out = out.replaceAll(secret, '***');
  return out;
}
