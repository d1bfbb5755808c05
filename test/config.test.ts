import { ConfigError, loadConfig } from '../src/config';

describe('configuration', () => {
  test('defaults hold with an empty environment', () => {
    const c = loadConfig({});
    expect(c.port).toBe(8080);
    expect(c.host).toBe('127.0.0.1');
    expect(c.publicUrl).toBe('http://localhost:8080');
    expect(c.databaseUrl).toBeUndefined();
    expect(c.repositoryOwners).toEqual([]);
    expect(c.policyFile).toMatch(/policies[/\\]default\.json$/);
    expect(c.trustProxy).toEqual(['loopback']);
  });

  test('TRUST_PROXY takes the names and address ranges Express accepts', () => {
    expect(loadConfig({ TRUST_PROXY: 'uniquelocal' }).trustProxy).toEqual(['uniquelocal']);
    expect(loadConfig({ TRUST_PROXY: ' loopback, linklocal ,10.0.0.0/8,172.18.0.5,fd00::/8,192.168.0.0/255.255.0.0' }).trustProxy).toEqual([
      'loopback',
      'linklocal',
      '10.0.0.0/8',
      '172.18.0.5',
      'fd00::/8',
      '192.168.0.0/255.255.0.0',
    ]);
  });

  test.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['PUBLIC_URL', 'not a url'],
    ['PUBLIC_URL', 'ftp://x'],
    ['DATABASE_URL', 'mysql://x'],
    ['REDIS_URL', 'http://x'],
    ['LOG_LEVEL', 'loud'],
    ['CARD_TRUST_ANCHORS', '/does/not/exist.pem'],
    ['POLICY_ENGINE_URL', 'nope'],
    ['TRUST_PROXY', 'nginx'],
    ['TRUST_PROXY', '10.0.0.0/33'],
    ['TRUST_PROXY', 'loopback, 300.1.1.1'],
  ])('a bad %s stops start-up naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    try {
      loadConfig({ [name]: value });
    } catch (err) {
      expect((err as ConfigError).variable).toBe(name);
      expect((err as Error).message.startsWith(`${name}:`)).toBe(true);
    }
  });

  test('PUBLIC_URL loses its trailing slash and owners are split', () => {
    const c = loadConfig({ PUBLIC_URL: 'https://t.example/', REPOSITORY_OWNERS: ' 1-A , 2-B,' });
    expect(c.publicUrl).toBe('https://t.example');
    expect(c.repositoryOwners).toEqual(['1-A', '2-B']);
  });
});
