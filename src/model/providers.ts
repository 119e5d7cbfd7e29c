import { AnthropicModel, type MessagesClient } from './anthropic-model.js';
import { ModelError } from './model.js';
import { providerModelId, ProviderConfigError, type ProviderConfig } from './provider-config.js';

export interface CreateModelOptions {
  /** Our name for the model (prices and trajectories use it); the provider's id is mapped from it. */
  readonly model: string;
  readonly maxAttempts?: number | undefined;
  readonly baseBackoffMs?: number | undefined;
  readonly timeoutMs?: number | undefined;
  readonly fetch?: typeof fetch | undefined;
  /** Anthropic only: the key and endpoint when they are not the configured ones (an oracle run's). */
  readonly apiKey?: string | undefined;
  readonly baseURL?: string | undefined;
}

/**
 * The Model for the configured provider: one AnthropicModel, whatever the door, so retries,
 * caching and usage are the same for all three. Bedrock's and Vertex's SDKs (with AWS's and
 * Google's libraries, seconds of loading) load on the first call, not at start. Their credentials
 * stay in this process: a sandbox's environment is built from scratch and never gets them.
 */
export function createModel(config: ProviderConfig, options: CreateModelOptions): AnthropicModel {
  const retries = {
    ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
    ...(options.baseBackoffMs === undefined ? {} : { baseBackoffMs: options.baseBackoffMs }),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  };
  if (config.kind === 'anthropic') {
    const apiKey = options.apiKey ?? config.apiKey;
    if (apiKey === null) {
      throw new ProviderConfigError(
        'ANTHROPIC_API_KEY is not set (or choose ISSUE_AGENT_MODEL_PROVIDER=bedrock or vertex)',
      );
    }
    const baseURL = options.baseURL ?? config.baseUrl ?? undefined;
    return new AnthropicModel({ apiKey, model: options.model, baseURL, ...retries });
  }
  const client = platformClient(config, options.timeoutMs ?? 600_000, options.fetch);
  // Awaited by the first complete(); marked handled so a failed load is not also an unhandled rejection.
  client.catch(() => undefined);
  return new AnthropicModel({
    apiKey: '',
    model: options.model,
    modelId: providerModelId(config, options.model),
    client,
    ...retries,
  });
}

/** Bedrock's or Vertex's client; the SDK's own retries off (AnthropicModel retries). */
async function platformClient(
  config: Exclude<ProviderConfig, { kind: 'anthropic' }>,
  timeout: number,
  fetchImpl: typeof fetch | undefined,
): Promise<MessagesClient> {
  const common = { maxRetries: 0, timeout, ...(fetchImpl === undefined ? {} : { fetch: fetchImpl }) };
  try {
    if (config.kind === 'bedrock') {
      const { AnthropicBedrock } = await import('@anthropic-ai/bedrock-sdk');
      const options = {
        ...common,
        awsRegion: config.region,
        ...(config.baseUrl === null ? {} : { baseURL: config.baseUrl }),
        // null, not absent: absent falls back to the process's environment, which the config read.
        apiKey: config.bearerToken,
      };
      return config.accessKeyId !== null && config.secretAccessKey !== null
        ? new AnthropicBedrock({
            ...options,
            awsAccessKey: config.accessKeyId,
            awsSecretKey: config.secretAccessKey,
            awsSessionToken: config.sessionToken,
          })
        : new AnthropicBedrock(options);
    }
    const [{ AnthropicVertex }, { GoogleAuth }] = await Promise.all([
      import('@anthropic-ai/vertex-sdk'),
      import('google-auth-library'),
    ]);
    return new AnthropicVertex({
      ...common,
      region: config.region,
      projectId: config.projectId,
      ...(config.baseUrl === null ? {} : { baseURL: config.baseUrl }),
      // Application Default Credentials, as the SDK's default, but told the project: without it,
      // a workload-identity credential would look the project up at Cloud Resource Manager.
      googleAuth: new GoogleAuth({
        scopes: 'https://www.googleapis.com/auth/cloud-platform',
        projectId: config.projectId,
      }),
    });
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new ModelError('connection', `cannot set up the ${config.kind} client: ${detail}`, null, {
      cause: error,
    });
  }
}
