import { z } from 'zod';

/**
 * Where Claude is reached: Anthropic's API, Amazon Bedrock or Google Vertex AI. All three speak the
 * Messages shape through Anthropic's SDKs, so the loop, retries (AnthropicModel's), prompt caching
 * and cost accounting are the same; what differs is the client (providers.ts), the model's id and
 * the price table. This file is the configuration alone: it loads no SDK, so whatever only needs to
 * know the provider (redaction, the Action's bundle) does not pull in AWS's or Google's libraries.
 */
export type ModelProvider = 'anthropic' | 'bedrock' | 'vertex';
export const MODEL_PROVIDERS: readonly ModelProvider[] = ['anthropic', 'bedrock', 'vertex'];

export interface AnthropicProvider {
  readonly kind: 'anthropic';
  readonly apiKey: string | null;
  readonly baseUrl: string | null;
}

export interface BedrockProvider {
  readonly kind: 'bedrock';
  /** `AWS_REGION` (or `AWS_DEFAULT_REGION`). */
  readonly region: string;
  /** `ANTHROPIC_BEDROCK_BASE_URL`: a VPC endpoint or a gateway; default the region's runtime endpoint. */
  readonly baseUrl: string | null;
  /** `ISSUE_AGENT_PROVIDER_MODEL_ID`: the id or inference-profile ARN to call instead of the mapped one. */
  readonly modelId: string | null;
  /**
   * Static keys when the environment has them (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
   * `AWS_SESSION_TOKEN`), else the AWS SDK's default chain (profile, SSO, web identity, instance
   * or task role). `AWS_BEARER_TOKEN_BEDROCK` (a Bedrock API key) wins over both, as in the SDK.
   */
  readonly accessKeyId: string | null;
  readonly secretAccessKey: string | null;
  readonly sessionToken: string | null;
  readonly bearerToken: string | null;
}

export interface VertexProvider {
  readonly kind: 'vertex';
  /** `CLOUD_ML_REGION`: a region such as `us-east5`, or `global`. */
  readonly region: string;
  /** `ANTHROPIC_VERTEX_PROJECT_ID` (or `GOOGLE_CLOUD_PROJECT`). */
  readonly projectId: string;
  /** `ANTHROPIC_VERTEX_BASE_URL`; default the region's aiplatform endpoint. */
  readonly baseUrl: string | null;
  readonly modelId: string | null;
  /*
   * No credentials here: google-auth-library's Application Default Credentials find them
   * (`GOOGLE_APPLICATION_CREDENTIALS`'s service-account or workload-identity file, gcloud's login,
   * the metadata server), as for any Google client.
   */
}

export type ProviderConfig = AnthropicProvider | BedrockProvider | VertexProvider;

export class ProviderConfigError extends Error {
  override readonly name = 'ProviderConfigError';
}

const text = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? null : v.trim()));
const baseUrl = text.refine((v) => v === null || /^https?:\/\/[^\s]+$/.test(v), 'must be an http(s) URL');

const bedrockEnv = z
  .object({
    AWS_REGION: text,
    AWS_DEFAULT_REGION: text,
    ANTHROPIC_BEDROCK_BASE_URL: baseUrl,
    ISSUE_AGENT_PROVIDER_MODEL_ID: text,
    AWS_ACCESS_KEY_ID: text,
    AWS_SECRET_ACCESS_KEY: text,
    AWS_SESSION_TOKEN: text,
    AWS_BEARER_TOKEN_BEDROCK: text,
  })
  .superRefine((env, ctx) => {
    if (env.AWS_REGION === null && env.AWS_DEFAULT_REGION === null) {
      ctx.addIssue({ code: 'custom', path: ['AWS_REGION'], message: 'is required (e.g. us-east-1)' });
    }
    if ((env.AWS_ACCESS_KEY_ID === null) !== (env.AWS_SECRET_ACCESS_KEY === null)) {
      ctx.addIssue({
        code: 'custom',
        path: [env.AWS_ACCESS_KEY_ID === null ? 'AWS_ACCESS_KEY_ID' : 'AWS_SECRET_ACCESS_KEY'],
        message: 'is required with the other half of the key pair (or set neither, for the default chain)',
      });
    }
  });

const vertexEnv = z
  .object({
    CLOUD_ML_REGION: text.refine((v) => v !== null, 'is required (e.g. us-east5, or global)'),
    ANTHROPIC_VERTEX_PROJECT_ID: text,
    GOOGLE_CLOUD_PROJECT: text,
    ANTHROPIC_VERTEX_BASE_URL: baseUrl,
    ISSUE_AGENT_PROVIDER_MODEL_ID: text,
  })
  .superRefine((env, ctx) => {
    if (env.ANTHROPIC_VERTEX_PROJECT_ID === null && env.GOOGLE_CLOUD_PROJECT === null) {
      ctx.addIssue({ code: 'custom', path: ['ANTHROPIC_VERTEX_PROJECT_ID'], message: 'is required' });
    }
  });

/** Reads `ISSUE_AGENT_MODEL_PROVIDER` and what the chosen provider needs; throws ProviderConfigError. */
export function readProviderConfig(env: NodeJS.ProcessEnv): ProviderConfig {
  const raw = (env.ISSUE_AGENT_MODEL_PROVIDER ?? '').trim().toLowerCase();
  const kind = raw === '' ? 'anthropic' : raw;
  if (kind === 'anthropic') {
    const parsed = z.object({ ANTHROPIC_API_KEY: text, ANTHROPIC_BASE_URL: text }).parse(env);
    return { kind, apiKey: parsed.ANTHROPIC_API_KEY, baseUrl: parsed.ANTHROPIC_BASE_URL };
  }
  if (kind === 'bedrock') {
    const e = parse(bedrockEnv, env, 'bedrock');
    return {
      kind,
      region: e.AWS_REGION ?? e.AWS_DEFAULT_REGION ?? '',
      baseUrl: e.ANTHROPIC_BEDROCK_BASE_URL,
      modelId: e.ISSUE_AGENT_PROVIDER_MODEL_ID,
      accessKeyId: e.AWS_ACCESS_KEY_ID,
      secretAccessKey: e.AWS_SECRET_ACCESS_KEY,
      sessionToken: e.AWS_SESSION_TOKEN,
      bearerToken: e.AWS_BEARER_TOKEN_BEDROCK,
    };
  }
  if (kind === 'vertex') {
    const e = parse(vertexEnv, env, 'vertex');
    return {
      kind,
      region: e.CLOUD_ML_REGION,
      projectId: e.ANTHROPIC_VERTEX_PROJECT_ID ?? e.GOOGLE_CLOUD_PROJECT ?? '',
      baseUrl: e.ANTHROPIC_VERTEX_BASE_URL,
      modelId: e.ISSUE_AGENT_PROVIDER_MODEL_ID,
    };
  }
  throw new ProviderConfigError(
    `ISSUE_AGENT_MODEL_PROVIDER must be one of ${MODEL_PROVIDERS.join(', ')}, got "${raw}"`,
  );
}

function parse<T extends z.ZodType>(schema: T, env: NodeJS.ProcessEnv, provider: string): z.output<T> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ');
  throw new ProviderConfigError(`ISSUE_AGENT_MODEL_PROVIDER=${provider}: ${problems}`);
}

/**
 * Our model names (Anthropic's API ids) as Bedrock and Vertex name them. Bedrock's are global
 * cross-region inference profiles (`global.`): Claude 4.5 and later models are not invoked on
 * demand by their bare id, and the global profile carries no regional premium. Newer models take
 * no date on either. A name not in the table, or an override, goes through unchanged.
 */
export const PROVIDER_MODEL_IDS: Readonly<Record<string, { bedrock: string; vertex: string }>> = {
  'claude-opus-4-6': { bedrock: 'global.anthropic.claude-opus-4-6-v1', vertex: 'claude-opus-4-6' },
  'claude-sonnet-4-6': { bedrock: 'global.anthropic.claude-sonnet-4-6', vertex: 'claude-sonnet-4-6' },
  'claude-opus-4-5': {
    bedrock: 'global.anthropic.claude-opus-4-5-20251101-v1:0',
    vertex: 'claude-opus-4-5@20251101',
  },
  'claude-sonnet-4-5': {
    bedrock: 'global.anthropic.claude-sonnet-4-5-20250929-v1:0',
    vertex: 'claude-sonnet-4-5@20250929',
  },
  'claude-haiku-4-5': {
    bedrock: 'global.anthropic.claude-haiku-4-5-20251001-v1:0',
    vertex: 'claude-haiku-4-5@20251001',
  },
  'claude-opus-4-1': {
    bedrock: 'us.anthropic.claude-opus-4-1-20250805-v1:0',
    vertex: 'claude-opus-4-1@20250805',
  },
  'claude-sonnet-4': {
    bedrock: 'global.anthropic.claude-sonnet-4-20250514-v1:0',
    vertex: 'claude-sonnet-4@20250514',
  },
};

/** The id the provider is called with for one of our model names. */
export function providerModelId(config: ProviderConfig, model: string): string {
  if (config.kind === 'anthropic') return model;
  if (config.modelId !== null) return config.modelId;
  const known = PROVIDER_MODEL_IDS[model.replace(/-\d{8}$/, '')];
  return known?.[config.kind] ?? model;
}

/**
 * Whether the provider bills this call at its regional rate (10% over list for Claude 4.5 and
 * later): Vertex outside its `global` endpoint, Bedrock outside a `global.` inference profile.
 */
export function isRegionalEndpoint(config: ProviderConfig, modelId: string): boolean {
  if (config.kind === 'vertex') return config.region !== 'global';
  if (config.kind === 'bedrock') return !/^(arn:[^/]*\/)?global\./.test(modelId);
  return false;
}

/** The credential values a run must redact wherever it writes (the key files' paths are not secret). */
export function providerSecrets(config: ProviderConfig): string[] {
  const values =
    config.kind === 'anthropic'
      ? [config.apiKey]
      : config.kind === 'bedrock'
        ? [config.secretAccessKey, config.sessionToken, config.bearerToken]
        : [];
  return values.filter((v): v is string => v !== null);
}
