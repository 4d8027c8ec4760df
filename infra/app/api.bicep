// The Function App on a Flex Consumption plan, running Python 3.13 as the user-assigned identity.
// From 3.13 on, Azure runs the app through the runtime library requirements.txt pins
// (azure-functions-runtime); Flex Consumption (FC1) lists python 3.13 among its runtimes.
// Its app settings are the ones shared/settings.py marks for Azure (a test checks the two agree).
param name string
param planName string
param location string
param tags object = {}
param storageAccountName string
param deploymentContainerName string
param applicationInsightsName string
param identityId string
param identityClientId string
param tickSchedule string
param cleanupSchedule string
param lookaheadSeconds int
param outboundAllowlist string
param serviceBusEndpointSuffix string
param maximumInstanceCount int
param instanceMemoryMB int
param alwaysReadyInstances int
// Sign-in (docs/security.md): the app registration, if any, and the administrator's key.
param authClientId string
param authTenantId string
@secure()
param administratorKey string

resource account 'Microsoft.Storage/storageAccounts@2025-01-01' existing = {
  name: storageAccountName
}

resource insights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

var appSettings = {
  // Storage for the host and the app, reached as the identity (shared-key access is off).
  AzureWebJobsStorage__blobServiceUri: account.properties.primaryEndpoints.blob
  AzureWebJobsStorage__queueServiceUri: account.properties.primaryEndpoints.queue
  AzureWebJobsStorage__tableServiceUri: account.properties.primaryEndpoints.table
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identityClientId
  // The service's root address leads to the console, not to the Functions host's own page.
  AzureWebJobsDisableHomepage: 'true'
  APPLICATIONINSIGHTS_CONNECTION_STRING: insights.properties.ConnectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
  // The scheduler's own (docs/settings.md, "The app's own").
  SCHEDULER_TICK_SCHEDULE: tickSchedule
  SCHEDULER_CLEANUP_SCHEDULE: cleanupSchedule
  SCHEDULER_LOOKAHEAD_SECONDS: string(lookaheadSeconds)
  SCHEDULER_OUTBOUND_ALLOWLIST: outboundAllowlist
  SCHEDULER_AUTHORITY_HOST: environment().authentication.loginEndpoint
  SCHEDULER_STORAGE_ENDPOINT_SUFFIX: environment().suffixes.storage
  SCHEDULER_SERVICEBUS_ENDPOINT_SUFFIX: serviceBusEndpointSuffix
  // The administrator's key, which the app checks itself (its routes are anonymous to the host).
  SCHEDULER_FUNCTION_KEY: administratorKey
}

resource plan 'Microsoft.Web/serverfarms@2024-11-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true // Linux
  }
}

resource app 'Microsoft.Web/sites@2024-11-01' = {
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': 'api' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    siteConfig: {
      minTlsVersion: '1.2'
      appSettings: [for setting in items(appSettings): { name: setting.key, value: setting.value }]
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${account.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
        // Warm executors run an occurrence within a second of its time; a cold one first starts.
        alwaysReady: alwaysReadyInstances > 0
          ? [{ name: 'function:executor', instanceCount: alwaysReadyInstances }]
          : []
      }
      runtime: {
        name: 'python'
        version: '3.13'
      }
    }
  }
}

// App Service Authentication with Entra ID, when given an app registration. Requests without a
// token still reach the app, which answers them 401 unless they carry the administrator key;
// the platform sets WEBSITE_AUTH_ENABLED, and replaces any X-MS-CLIENT-PRINCIPAL a client sends,
// so the app believes the caller it names. App roles arrive as the token's `roles` claims.
resource auth 'Microsoft.Web/sites/config@2024-11-01' = if (!empty(authClientId)) {
  parent: app
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
    }
    globalValidation: {
      requireAuthentication: false
      unauthenticatedClientAction: 'AllowAnonymous'
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          clientId: authClientId
          openIdIssuer: '${environment().authentication.loginEndpoint}${authTenantId}/v2.0'
        }
        validation: {
          allowedAudiences: [
            'api://${authClientId}'
            authClientId
          ]
        }
      }
    }
    login: {
      tokenStore: {
        enabled: false
      }
    }
  }
}

output name string = app.name
output url string = 'https://${app.properties.defaultHostName}'
